from __future__ import annotations

from sparktui.cli import main

raise SystemExit(main())
