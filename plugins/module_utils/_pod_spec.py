# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pod template both DaemonSet modules build (device_plugin_deploy, dra_driver_deploy): the labels naming the
workload, container environment, required node affinity, hostPath volumes, the image pull policy kube-apiserver
fills in, and the rules of the input values both modules take (DNS labels, environment variable names, whole numbers).

Private to the collection. Pure functions over plain dicts; the device-plugin manifest is _device_plugin_manifest.py,
the DRA driver's _dra_driver_manifest.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible_collections.kubehw.devices.plugins.module_utils._errors import InputRefused
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_names import DNS1123_LABEL_RE
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_objects import to_text

NAME_LABEL = "app.kubernetes.io/name"
COMPONENT_LABEL = "app.kubernetes.io/component"

_ENV_NAME_RE = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")  # used with fullmatch
_PERCENT_RE = re.compile(r"[0-9]+%")  # used with fullmatch


# -- input rules ----------------------------------------------------------------------------------

def check_dns_label(value, what):
    if not isinstance(value, str) or len(value) > 63 or not DNS1123_LABEL_RE.match(value):
        raise InputRefused(
            "%s %r must be a lowercase RFC 1123 DNS label (a-z, 0-9 and '-', at most 63 characters, "
            "starting and ending with a letter or digit)" % (what, value))


def check_env_names(env):
    """Refuse container environment variable names the rule below does not allow (both DaemonSet modules)."""
    for key in env or {}:
        if not _ENV_NAME_RE.fullmatch(key):
            raise InputRefused("env name %r must consist of letters, digits, '_', '-' or '.', "
                               "and must not start with a digit" % key)


def positive_int(value, what, minimum=1):
    if isinstance(value, bool):
        raise InputRefused("%s %r must be a whole number >= %d" % (what, value, minimum))
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or value < minimum:
        raise InputRefused("%s %r must be a whole number >= %d" % (what, value, minimum))
    return value


# -- pod template parts ---------------------------------------------------------------------------

def int_or_percent(value, what):
    """A DaemonSet's maxUnavailable or maxSurge as the API takes it: a whole number (AWX hands "2" over as a string)
    or a percentage such as "25%"."""
    if isinstance(value, bool):
        raise InputRefused("%s %r must be a whole number or a percentage such as '25%%'" % (what, value))
    if isinstance(value, int):
        if value < 0:
            raise InputRefused("%s %r must not be negative" % (what, value))
        return value
    if isinstance(value, str):
        if value.isdigit():
            return int(value)
        if _PERCENT_RE.fullmatch(value):
            return value
    raise InputRefused("%s %r must be a whole number or a percentage such as '25%%'" % (what, value))


def rolling_update(strategy):
    """The RollingUpdate updateStrategy of the options max_unavailable and max_surge (either may be None), checked:
    each a whole number or a percentage, not both 0."""
    rolling = {}
    for key, field in (("max_unavailable", "maxUnavailable"), ("max_surge", "maxSurge")):
        if strategy.get(key) is not None:
            rolling[field] = int_or_percent(strategy[key], "update_strategy.%s" % key)
    if rolling.get("maxUnavailable") in (0, "0%") and rolling.get("maxSurge") in (None, 0, "0%"):
        raise InputRefused("update_strategy max_unavailable and max_surge cannot both be 0 (nothing could roll)")
    update_strategy = {"type": "RollingUpdate"}
    if rolling:
        update_strategy["rollingUpdate"] = rolling
    return update_strategy


def host_path_volume(name, path, path_type=None):
    host_path = {"path": path}
    if path_type:
        host_path["type"] = path_type
    return {"name": name, "hostPath": host_path}


def env_list(preset_env, user_env):
    """The preset's env entries with the user's env over them (by name; new names appended in sorted order)."""
    env = [copy.deepcopy(e) for e in preset_env]
    index = dict((e["name"], i) for i, e in enumerate(env))
    for key in sorted(user_env or {}):
        value = user_env[key]
        entry = dict(value, name=key) if isinstance(value, dict) else {"name": key, "value": to_text(value)}
        if key in index:
            env[index[key]] = entry
        else:
            env.append(entry)
    return env


def default_affinity(terms):
    """Required node affinity: any of the terms (ORed), each term's labels all (ANDed)."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": "In", "values": [value]} for key, value in term]}
        for term in terms]}}}


def default_pull_policy(image):
    """The apiserver's defaulting: Always for :latest or no tag, IfNotPresent otherwise (digests included)."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    if ":" not in last or last.rsplit(":", 1)[1] == "latest":
        return "Always"
    return "IfNotPresent"
