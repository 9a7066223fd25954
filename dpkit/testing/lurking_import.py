"""A plug-in module that starts a thread when it is imported — in the fork server too, which
imports every plug-in once, unconfined, and whose memory every server inherits. The thread reads
the private file of :func:`dpkit.testing.lurking.lurk_path` a second later; servers forked after
that would inherit what it read, so a fork server with such a thread forks no confined server
(:mod:`dpkit.boundary.fork_check`). Load with
``DPKIT_EXTRA_PLUGINS=toy=dpkit.testing.toy,lurk=dpkit.testing.lurking,early=dpkit.testing.lurking_import``.
"""

from __future__ import annotations

import threading

from dpkit.testing import lurking

threading.Thread(target=lurking._lurk, args=(str(lurking.lurk_path()), 1.0), name="import-lurker",
                 daemon=True).start()
