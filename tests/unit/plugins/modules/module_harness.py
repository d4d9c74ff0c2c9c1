# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the module unit tests share: running a module's main() in-process, and a KubeClient stand-in.

The fake client calls the fake API's methods directly (the `what` label dropped), so each test file only
writes the API it needs. Timing and real watches are the integration tests' business.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json

import pytest

from ansible.module_utils import basic
from ansible.module_utils.common import warnings as module_warnings

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core before 2.19 (make min-versions runs 2.17, make core-2.18 runs 2.18)
    @contextlib.contextmanager
    def patch_module_args(args):
        """What ansible.module_utils.testing.patch_module_args does on 2.19: the arguments AnsibleModule reads."""
        saved = basic._ANSIBLE_ARGS
        basic._ANSIBLE_ARGS = json.dumps({"ANSIBLE_MODULE_ARGS": args}).encode("utf-8")
        try:
            yield
        finally:
            basic._ANSIBLE_ARGS = saved

from ansible_collections.kubehw.devices.plugins.module_utils._client import KubeClient
from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError, WaitTimedOut


def run_module(module, capsys, args, check=False, diff=False):
    """Run ``module.main()`` with ``args`` (check/diff mode as asked) and return its JSON result.

    A module process starts with no warnings; in this one process ansible-core would return every earlier run's too
    (it keeps them in module-level collections, a list before 2.19 and a dict since), so they are emptied first."""
    module_warnings._global_warnings.clear()  # pylint: disable=protected-access
    module_warnings._global_deprecations.clear()  # pylint: disable=protected-access
    args = dict(args)
    if check:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


class NoClient(object):
    """Stands in for KubeClient where a module must refuse before connecting: any attempt is counted (``made``) and
    fails the module with "connected to the cluster"."""

    made = 0

    def __init__(self, module):
        type(self).made += 1
        module.fail_json(msg="connected to the cluster")


class FakeClient(object):
    """KubeClient's calling conventions over a fake API object; subclass and set ``api``."""

    api = None
    constructed = 0

    def __init__(self, module):
        type(self).constructed += 1
        self.core = self.apps = self.node_api = self.rbac = self.custom = type(self).api
        self.api_client = None

    # True: errors are worded as KubeClient words them ("Failed to <what>: <status> <message>")
    word_errors = False

    def call_json(self, fn, *args, **kwargs):
        what = kwargs.pop("what", None)
        try:
            return fn(*args, **kwargs)
        except KubeHwError as err:
            if not self.word_errors or what is None:
                raise
            raise KubeHwError("Failed to %s: %s %s" % (what, err.status, err.msg), status=err.status,
                              reason=err.reason, body=err.body)

    # one request each on the fake: no answers get lost, no pages
    create_json = call_json
    replace_json = call_json
    list_all = call_json
    # KubeClient's own paging over the fake's list function (the fake decides which pages it serves)
    list_pages = KubeClient.list_pages
    retry_deadline = 45

    def watch(self, list_fn, predicate, timeout, what="watch", **kw):
        return self.list_watch(list_fn, what, **kw).until(predicate, timeout)

    def list_watch(self, list_fn, what="watch", **kw):
        return FakeListWatch(list_fn, what, kw)


class FakeListWatch(object):
    """KubeClient's ListWatch over the fake: as ListWatch.until, a call returns what it holds when the predicate holds
    on it; otherwise it lists once and judges once, so the predicate holds now or the wait 'times out' (the fake's
    state between calls is the test's to set)."""

    def __init__(self, list_fn, what, list_kwargs):
        self.list_fn = list_fn
        self.what = what
        self.list_kwargs = list_kwargs
        self.objects = {}
        self.listed = False

    def relist(self):
        self.listed = False
        return self.until(lambda _objects: True, 1.0)

    def until(self, predicate, timeout):
        if self.listed and predicate(self.objects):
            return self.objects
        items = self.list_fn(**self.list_kwargs)["items"]
        self.objects = dict((("%s/%s" % (o["metadata"]["namespace"], o["metadata"]["name"]))
                             if o["metadata"].get("namespace") else o["metadata"]["name"], o) for o in items)
        self.listed = True
        if predicate(self.objects):
            return self.objects
        raise WaitTimedOut(timeout, "waiting to %s" % self.what, self.objects)
