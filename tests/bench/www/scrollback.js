// Contender "Scrollback": the package as an app uses it (pkg/index.js, served at /pkg/).
import { Scrollback } from '/pkg/index.js';

const describe = (r) => `${r.kind} ${r.text ?? ''}`;

export async function open({ id, server, storage, show }) {
  const sb = await Scrollback.open({ server, storage });
  const draw = (state) => { if (state.ready && state.rows.length) show(state.rows, describe); };
  const view = await sb.openSession(id, { onChange: draw });
  draw(view.state);
  return {
    cursor: () => view.state.cursor,
    async scrollBack(deadline) {
      let pages = 0;
      while (performance.now() < deadline) {
        if (!(await view.loadOlder())) return { pages, done: true };
        pages += 1;
      }
      return { pages, done: false };
    },
    settled: async () => {},
    storageBytes: () => view.cachedSize(),
  };
}
