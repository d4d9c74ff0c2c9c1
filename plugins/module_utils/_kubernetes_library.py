# -*- coding: utf-8 -*-
# Copyright: kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The kubernetes Python library, imported once, when the first client or configuration is built.

Private to the collection: the interface may change without notice.

``import_kubernetes()`` sets this module's names (``kubernetes``, ``urllib3``, ``ApiException``...); the other
module_utils read them as attributes of this module (``_kubernetes_library.ApiException``) when they run, never
with ``from ... import``, which would keep the None they hold before the import.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import gc
import traceback

# The kubernetes library is imported when the first client is built (import_kubernetes()), not when a module
# starts: a task that refuses its input before any request then never pays for it (about 0.5 CPU-s, most of
# such a task's time). Until then these names are None and HAS_KUBERNETES is None (not tried yet).
kubernetes = urllib3 = ApiException = ConfigException = HTTPHeaderDict = None
# What a request fails with when the connection fails (urllib3's classes are added on import).
CONNECTION_ERRORS = (ConnectionError,)
HAS_KUBERNETES = None
KUBERNETES_IMPORT_ERROR = None


def _without_gc(fn, *args):
    """fn(*args) with the cyclic garbage collector paused: importing the kubernetes library creates thousands of
    objects (every model class in kubernetes before 35), and the collector would scan the growing heap again and
    again meanwhile (about an eighth of that CPU time, measured with kubernetes 37)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return fn(*args)
    finally:
        if enabled:
            gc.enable()


def import_kubernetes():
    """Import the kubernetes library and its urllib3 (once); return whether they are installed."""
    if HAS_KUBERNETES is None:
        _without_gc(_import_kubernetes)
    return HAS_KUBERNETES


def _import_kubernetes():
    global kubernetes, urllib3, ApiException, ConfigException, HTTPHeaderDict, CONNECTION_ERRORS
    global HAS_KUBERNETES, KUBERNETES_IMPORT_ERROR
    try:
        import kubernetes
        import urllib3
        from kubernetes.client.rest import ApiException
        from kubernetes.config.config_exception import ConfigException

        try:
            from urllib3 import HTTPHeaderDict  # urllib3 2.x exports it here
        except ImportError:
            from urllib3._collections import HTTPHeaderDict  # urllib3 1.26 only has it here

        CONNECTION_ERRORS = (urllib3.exceptions.ProtocolError, urllib3.exceptions.NewConnectionError,
                             urllib3.exceptions.MaxRetryError, urllib3.exceptions.TimeoutError, ConnectionError)
        HAS_KUBERNETES = True
    except ImportError:
        HAS_KUBERNETES = False
        KUBERNETES_IMPORT_ERROR = traceback.format_exc()
