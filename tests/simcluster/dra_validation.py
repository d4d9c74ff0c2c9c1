# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The apiserver's validation of the DeviceClass fields the collection sends (pkg/apis/resource/validation),
selectors compiled by cel.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from tests.simcluster.cel import compile_cel
from tests.simcluster.names import DNS1123_SUBDOMAIN_MESSAGE, DNS_SUBDOMAIN_RE, is_extended_resource_name


# pkg/apis/resource types.go (1.34): limits the validation below enforces
DEVICE_SELECTORS_MAX = 32
DEVICE_CONFIG_MAX = 32
CEL_MAX_LENGTH = 10 * 1024
OPAQUE_PARAMETERS_MAX = 10 * 1024
DRIVER_NAME_MAX = 63


def _driver_errors(field, driver):
    if not driver:
        return [(field, "Required", "")]
    errors = []
    if len(driver) > DRIVER_NAME_MAX:
        errors.append((field, "Too long", "may not be more than %d bytes" % DRIVER_NAME_MAX, driver))
    if not DNS_SUBDOMAIN_RE.match(driver.lower()):
        errors.append((field, "Invalid", DNS1123_SUBDOMAIN_MESSAGE, driver))
    return errors


def validate(resource, obj, old=None):
    """Field errors as (field, kind, detail[, value]) tuples; validation.py wraps them in FieldError."""
    if resource != "deviceclasses":
        return []
    errors = []
    name = (obj.get("metadata") or {}).get("name") or ""
    if len(name) > 253 or not DNS_SUBDOMAIN_RE.match(name):
        errors.append(("metadata.name", "Invalid", DNS1123_SUBDOMAIN_MESSAGE, name))
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    old_spec = (old or {}).get("spec") or {}
    selectors = spec.get("selectors") or []
    if len(selectors) > DEVICE_SELECTORS_MAX:
        errors.append(("spec.selectors", "Too many", "%d: must have at most %d items" % (len(selectors), DEVICE_SELECTORS_MAX)))
    # unchanged selectors count as stored: the apiserver does not compile them again on update
    stored = old is not None and selectors == (old_spec.get("selectors") or [])
    for index, selector in enumerate(selectors):
        field = "spec.selectors[%d].cel" % index
        cel = selector.get("cel") if isinstance(selector, dict) else None
        if not isinstance(cel, dict):
            errors.append((field, "Required", ""))
            continue
        expression = cel.get("expression") or ""
        if stored:
            continue
        if len(expression) > CEL_MAX_LENGTH:
            errors.append((field + ".expression", "Too long", "may not be more than %d bytes" % CEL_MAX_LENGTH,
                           expression))
            continue
        problem = compile_cel(expression)
        if problem:
            errors.append((field + ".expression", "Invalid", problem, expression))
    config = spec.get("config") or []
    if len(config) > DEVICE_CONFIG_MAX:
        errors.append(("spec.config", "Too many", "%d: must have at most %d items" % (len(config), DEVICE_CONFIG_MAX)))
    for index, entry in enumerate(config):
        field = "spec.config[%d].opaque" % index
        opaque = entry.get("opaque") if isinstance(entry, dict) else None
        if not isinstance(opaque, dict):
            errors.append((field, "Required", ""))
            continue
        errors.extend(_driver_errors(field + ".driver", opaque.get("driver")))
        parameters = opaque.get("parameters")
        if parameters is None:
            errors.append((field + ".parameters", "Required", ""))
        elif len(json.dumps(parameters, separators=(",", ":"))) > OPAQUE_PARAMETERS_MAX:
            errors.append((field + ".parameters", "Too long", "may not be more than %d bytes" % OPAQUE_PARAMETERS_MAX,
                           ""))
    extended = spec.get("extendedResourceName")
    if extended is not None and not is_extended_resource_name(extended):
        errors.append(("spec.extendedResourceName", "Invalid", "must be a valid extended resource name", extended))
    return errors
