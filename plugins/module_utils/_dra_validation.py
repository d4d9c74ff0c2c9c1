# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Dynamic Resource Allocation: the input rules checked before any request (DeviceClass and driver names,
CEL selectors with the optional local cel-python check, opaque parameters, extended resource names) and
the limits of ``pkg/apis/resource`` they enforce.

Private to the collection: the interface may change without notice.

The limits come from the Kubernetes sources, release 1.34/1.35 (``staging/src/k8s.io/api/resource/
v1/types.go``, ``pkg/apis/resource/validation/validation.go``) and from the
measurements in the shared apiserver facts (DRA on kube-apiserver v1.36.2).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.kubehw.devices.plugins.module_utils._extended_resources import extended_resource_name_problem
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_names import (
    DNS1123_SUBDOMAIN_MAX,
    DNS1123_SUBDOMAIN_RE,
)

CEL_IMPORT_ERROR = None
try:
    # cel-python (PyPI cel-python, module celpy): optional; without it the apiserver's dry run decides.
    import celpy

    HAS_CEL = True
except ImportError:  # pragma: no cover - depends on the environment
    celpy = None
    HAS_CEL = False
    CEL_IMPORT_ERROR = "cel-python is not installed"

# Limits of pkg/apis/resource (types.go constants), checked here before any request.
DEVICE_SELECTORS_MAX = 32           # DeviceSelectorsMaxSize
DEVICE_CONFIG_MAX = 32              # DeviceConfigMaxSize
CEL_EXPRESSION_MAX_LENGTH = 10 * 1024   # CELSelectorExpressionMaxLength
OPAQUE_PARAMETERS_MAX_LENGTH = 10 * 1024    # OpaqueParametersMaxLength
DRIVER_NAME_MAX = 63                # DriverNameMaxLength (ValidateCSIDriverName)


def device_class_name_problem(name):
    if not isinstance(name, str) or not name:
        return "must be a non-empty string"
    if len(name) > DNS1123_SUBDOMAIN_MAX or not DNS1123_SUBDOMAIN_RE.match(name):
        return ("must be a lowercase RFC 1123 DNS subdomain (a-z, 0-9, '-' and '.', at most %d characters, "
                "starting and ending with a letter or digit)" % DNS1123_SUBDOMAIN_MAX)
    return None


def driver_name_problem(name):
    """As the apiserver checks a DRA driver name (ValidateCSIDriverName): a DNS subdomain of at most 63 characters.

    The apiserver compares in lower case; drivers are asked to use lower case only, and so does this module,
    because the kubelet plugin registers the name as written.
    """
    if not isinstance(name, str) or not name:
        return "must be a non-empty string"
    if len(name) > DRIVER_NAME_MAX:
        return "must be no more than %d characters, got %d" % (DRIVER_NAME_MAX, len(name))
    if not DNS1123_SUBDOMAIN_RE.match(name):
        return ("must be a lowercase DNS subdomain (a-z, 0-9, '-' and '.', starting and ending with a letter or "
                "digit), and should end with a domain the driver's vendor owns, such as gpu.nvidia.com")
    return None


def cel_problem(expression, compile_fn=None):
    """Why a CEL selector expression is refused before any request, or None.

    Syntax is checked locally when cel-python is importable (``compile_fn`` replaces it in tests); type errors
    such as ``device.driver + 1`` are left to the apiserver, whose compiler knows the DRA environment.
    """
    if not isinstance(expression, str) or not expression.strip():
        return "must be a non-empty CEL expression"
    if len(expression) > CEL_EXPRESSION_MAX_LENGTH:
        return "must be no more than %d characters, got %d" % (CEL_EXPRESSION_MAX_LENGTH, len(expression))
    if compile_fn is None and HAS_CEL:
        compile_fn = celpy.Environment().compile
    if compile_fn is None:
        return None
    try:
        compile_fn(expression)
    except Exception as err:  # pylint: disable=broad-except
        # celpy raises CELParseError with line and column; anything else from the library counts the same.
        line, column = getattr(err, "line", None), getattr(err, "column", None)
        where = " at line %s, column %s" % (line, column) if line is not None else ""
        first = ("%s" % err).strip().splitlines()[0] if ("%s" % err).strip() else type(err).__name__
        return "is not valid CEL: syntax error%s near %r (checked locally with cel-python)" % (where, first)
    return None


def parameters_problem(parameters):
    if parameters is None:
        return "is required (the driver's own configuration object, for example {apiVersion, kind, ...})"
    try:
        text = json.dumps(parameters, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError) as err:
        return "must be JSON data: %s" % err
    if len(text) > OPAQUE_PARAMETERS_MAX_LENGTH:
        return "must be no more than %d bytes as JSON, got %d" % (OPAQUE_PARAMETERS_MAX_LENGTH, len(text))
    return None


def extended_name_problem(name):
    return extended_resource_name_problem(name)
