"""The operators' console: the operators' routes on a page, and who may use them. `doors`: each
route through two doors, one implementation (the admin key; a signed-in operator), every action
run as the operator admitted; `identity`: the signed-in operator App Service Authentication
names; `guard`: actions protected against cross-site requests; `negotiation`: one answer, JSON
or the page's HTML fragment rendered from it; `render` and `chart`: the templates (Jinja2,
autoescaped) and the backlog chart (pygal, SVG), imported on the first request that needs them;
`page`: the page and its static files. `templates/`: page.html and a fragment per operation
(`fragments/<operation>.html`, or one it shares: `render`; none: its JSON shown); `static/`:
console.css, console.js and vendor/ (htmx, fetched from npm when the wheel is built:
hatch_build.py)."""
