# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated cluster's own endpoints under /simcluster/ (admin token only): the request log, faults, node
hooks of the controllers, compaction.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from tests.simcluster.errors import status_body


class AdminEndpointsMixin:
    """/simcluster/ of ApiServer. Needs ``self.admin_token``, ``self.admin_hooks``, ``self.store`` and
    the request log and fault table.
    """

    def _admin(self, req):
        auth = req.headers.get("Authorization") or ""
        if auth != "Bearer %s" % self.admin_token:
            return (401, status_body(401, "Unauthorized", "Unauthorized"), {})
        parts = [p for p in req.path.split("/") if p][1:]
        try:
            payload = json.loads(req.body.decode("utf-8")) if req.body else {}
        except ValueError as e:
            return (400, status_body(400, "BadRequest", "invalid JSON body: %s" % e), {})
        if parts == ["requests"] and req.method == "GET":
            return (200, {"requests": self.requests}, {})
        if parts == ["requests"] and req.method == "DELETE":
            self.clear_requests()
            return (200, {"cleared": True}, {})
        if parts == ["faults"] and req.method == "POST":
            try:
                self.inject_fault(payload.get("method", "*"), payload["path_regex"], payload.get("status", 500),
                                  payload.get("count", 1), payload.get("retry_after"))
            except (KeyError, ValueError, re.error) as e:
                return (400, status_body(400, "BadRequest", "bad fault: %s" % e), {})
            return (201, {"injected": payload}, {})
        if parts == ["faults"] and req.method == "DELETE":
            self.clear_faults()
            return (200, {"cleared": True}, {})
        if len(parts) == 3 and parts[0] == "nodes" and req.method == "POST" and \
                parts[2] in ("unreachable", "fail-pods"):
            hook = self.admin_hooks.get(parts[2])
            if hook is None:
                return (501, status_body(501, "NotImplemented", "no controllers running"), {})
            if parts[2] == "unreachable":
                hook(parts[1], payload.get("unreachable", True))
            else:
                hook(parts[1], payload.get("reason", "ImagePullBackOff"))
            return (200, {"node": parts[1], parts[2]: payload or True}, {})
        if parts == ["compact"] and req.method == "POST":
            self.store.compact(expire_watches=bool(payload.get("expire_watches")))
            return (200, {"compacted": True}, {})
        return (404, status_body(404, "NotFound", "no such simcluster endpoint"), {})
