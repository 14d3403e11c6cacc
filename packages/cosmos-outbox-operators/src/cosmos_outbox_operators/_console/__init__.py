"""The operators' console: the operators' routes on a page, and who may use them.

doors.py      the operators' routes through two doors, one implementation: the admin key
              (auth level ADMIN: the Functions host checks the master key) and a signed-in
              operator (App Service Authentication names them; this package checks the
              role); every action run as the operator admitted (`cosmos_outbox.operations._actor`)
identity.py   the signed-in operator: App Service Authentication's X-MS-CLIENT-PRINCIPAL,
              believed only where the owner names what signs operators in
              (OUTBOX_CONSOLE_SIGN_IN), the platform says so (WEBSITE_AUTH_ENABLED) and
              the host is not a local one (FUNCTIONS_CORETOOLS_ENVIRONMENT)
guard.py      actions from the page protected against cross-site requests (same origin by
              Origin / Sec-Fetch-Site, and a double-submit token)
negotiation.py  one answer, two forms: JSON for scripts, an HTML fragment for the page
              (HX-Request, or Accept preferring text/html), rendered from the same JSON
render.py     the templates (Jinja2, autoescaped) and the chart (pygal, SVG), imported on
              the first request that needs them, never when the app is indexed
page.py       the page itself and its static files (htmx, shipped in the wheel; ours)
templates/    page.html and one fragment per operation (fragments/<operation name>.html;
              an operation without one shows its JSON answer, so new routes show up)
static/       console.css, console.js, vendor/ (htmx, fetched from npm when the wheel is
              built: packages/cosmos-outbox-operators/hatch_build.py; never in the repository)
"""
