# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The log of the requests an ApiServer answered (method, path, query, body, status, user: the name users.py
user_name gives the authenticated user), as tests read it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time


class RequestLogMixin:
    """The requests answered, in order. Needs ``self._log`` (a list) and ``self._lock``.
    """

    @property
    def requests(self):
        with self._lock:
            return [dict(e) for e in self._log]

    def clear_requests(self):
        with self._lock:
            del self._log[:]

    def _log_request(self, req):
        entry = {"method": req.method, "path": req.path,
                 "query": dict((k, v[-1]) for k, v in req.query.items()),
                 "content_type": req.content_type or None,
                 "body": req.body.decode("utf-8", "replace") if req.body else None,
                 "status": None, "user": None, "time": time.time()}
        with self._lock:
            self._log.append(entry)
        return entry

    def _finish_log(self, entry, status, user):
        with self._lock:
            entry["status"] = status
            entry["user"] = user
