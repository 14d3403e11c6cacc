"""The release check (`make release-check`, `python -m tools.release`): what would be uploaded to
PyPI, built once, checked, served as a local index that stands for PyPI, and tried as a stranger
would try it, in clean venvs on every Python each distribution supports. RELEASING.md says what
it proves and what only a real upload can.

- `dists`: the six distributions, read from their pyproject.toml (names, versions, Pythons);
  `python -m tools.release.dists` prints their release order;
- `build`: the sdists and wheels (the wheel built from the sdist, as pip builds it) and their
  checks: metadata and README as the registry renders them, the wheel's contents, the same wheel
  from the tree, every file of the package's folder in its sdist, the requirements between them
  and in the docs resolvable;
- `changelog`: a CHANGELOG as a release reads it (its checks, the release's notes) and writes it
  (the release commit's edit);
- `commands`: the make commands the docs show, asked of make (one it refuses is named);
- `index`: dist/ as a PEP 503 simple index on 127.0.0.1;
- `trial`: the clean venvs: each README's and guide's install lines run verbatim, its first
  example (on funcstack's Cosmos DB endpoint where a block needs an account), each
  distribution's own tests from its sdist; the CPU each trial's processes used;
- `background`: what a trial runs beside its steps (a guide's `funcstack run`, the Cosmos DB
  endpoint), until a Ctrl-C.
"""
