from emulators.stack import main

raise SystemExit(main())
