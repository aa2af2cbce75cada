// A dedicated worker that times one request (a static file, not counted by /stats): the bench
// compares it with and without the emulated slow link, to check the link throttles workers too.
onmessage = async () => {
  const t0 = performance.now();
  await (await fetch(`./index.html?probe=${Math.random()}`, { cache: 'no-store' })).text();
  postMessage(performance.now() - t0);
};
