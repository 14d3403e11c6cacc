from localstack.stack import main

raise SystemExit(main())
