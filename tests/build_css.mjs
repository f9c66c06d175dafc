// Builds static/css/site.css, the one stylesheet every page links: Bootstrap's CSS with only the rules the
// portal's pages can use (PurgeCSS), then the portal's own static/css/portal.css. Never edit site.css by hand:
// change a template or portal.css, then run `npm run --prefix tests build-css` and commit both.
// tests/test_first_visit.py fails while site.css is not what this script makes of the checkout.
//
//   node tests/build_css.mjs [OUTPUT]     (default: static/css/site.css)
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import { PurgeCSS } from "purgecss";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
const bootstrap = dirname(require.resolve("bootstrap/package.json"));
const output = process.argv[2] ?? join(root, "static/css/site.css");

const [purged] = await new PurgeCSS().purge({
  css: [join(bootstrap, "dist/css/bootstrap.min.css")],
  content: [
    // Every class a page can carry: the templates and the portal's scripts,
    join(root, "templates/**/*.html"),
    join(root, "static/js/*.js"),
    // and those no file of ours names: what Bootstrap's script adds to the two components the pages use (the
    // menu's collapse and the dropdown), and what Bootstrap-Flask's pagination macro draws (the audit log).
    { raw: "show collapsing collapsed dropdown-menu-end pagination page-item page-link active disabled", extension: "html" },
  ],
  // The flash messages' categories are put together in a template (alert-{{ category }}).
  safelist: { standard: [/^alert-(success|info|warning|danger)$/] },
  // The light and dark themes (static/js/theme.js sets the attribute) and the menus' placement by Popper.
  dynamicAttributes: ["data-bs-theme", "data-bs-popper"],
  fontFace: false,
  keyframes: true,
});

const banner = "/* Built by tests/build_css.mjs from Bootstrap 5.3.8 and static/css/portal.css: do not edit. */\n";
writeFileSync(output, banner + purged.css + "\n" + readFileSync(join(root, "static/css/portal.css"), "utf8"));
console.log(`${output}: ${Buffer.byteLength(readFileSync(output))} bytes`);
