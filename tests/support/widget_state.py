"""What a widget may sync to the browser: no trait whose name looks like a credential (docs/security.md)."""

from __future__ import annotations

import re

SECRET_NAMES = re.compile(r"(api_?)?key$|^key|secret|password|auth|url|bearer|^token|_token$", re.IGNORECASE)
