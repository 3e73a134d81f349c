// `npm run build`'s last step: dist/esm/ holds the ES module build, but its `.js` files would be read as CommonJS
// (the package's own package.json has no "type"); this package.json makes Node, TypeScript and bundlers read them as
// ES modules.
import { writeFileSync } from 'node:fs';

writeFileSync('dist/esm/package.json', `${JSON.stringify({ type: 'module' })}\n`);
