// A TCP relay for tests: stands between the browser and the server on another loopback port,
// and can go silent on a connection while keeping it open (what a phone changing networks, a
// NAT that forgot the connection or a proxy that holds it does to a stream).
import net from 'node:net';

/**
 * A TCP relay on a free loopback port, in front of the server port set as `upstream`.
 * `goSilent()` stops relaying, both ways, every open connection that carries an `/events`
 * request, and keeps it open; later connections are relayed as before.
 */
export async function startRelay() {
  const streams = []; // { silent } of each event stream's connection
  const sockets = new Set();
  let upstreamPort = null;
  const relay = net.createServer((client) => {
    const server = net.connect(upstreamPort, '127.0.0.1');
    const conn = { silent: false, stream: false };
    sockets.add(client).add(server);
    client.on('data', (chunk) => {
      if (!conn.stream && chunk.toString('latin1').includes('/events?')) {
        conn.stream = true;
        streams.push(conn);
      }
      if (!conn.silent) server.write(chunk);
    });
    server.on('data', (chunk) => { if (!conn.silent) client.write(chunk); });
    const end = () => { client.destroy(); server.destroy(); };
    client.on('close', end).on('error', end);
    server.on('close', end).on('error', end);
  });
  await new Promise((resolve) => relay.listen(0, '127.0.0.1', resolve));
  return {
    port: relay.address().port,
    set upstream(port) { upstreamPort = port; },
    streamsOpened: () => streams.length,
    goSilent() {
      for (const s of streams) s.silent = true;
      return streams.length;
    },
    close() {
      for (const s of sockets) s.destroy();
      relay.close();
    },
  };
}

