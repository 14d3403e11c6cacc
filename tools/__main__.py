from tools.stack import main

raise SystemExit(main())
