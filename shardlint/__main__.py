from shardlint.cli import main

raise SystemExit(main())
