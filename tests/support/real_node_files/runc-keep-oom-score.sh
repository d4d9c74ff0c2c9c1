#!/bin/sh
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Installed as /usr/local/sbin/runc on the real node only where root lacks CAP_SYS_RESOURCE (some CI sandboxes):
# runc could not give a container the negative oom_score_adj the kubelet asks for (-998 for sandboxes), and every
# pod would fail to start. Raises those to 0 in the bundle's config.json, then runs the packaged runc.
bundle=""
previous=""
for argument in "$@"; do
    case "$previous" in --bundle|-b) bundle="$argument" ;; esac
    case "$argument" in --bundle=*) bundle="${argument#--bundle=}" ;; esac
    previous="$argument"
done
if [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then
    sed -i 's/"oomScoreAdj":-[0-9]*/"oomScoreAdj":0/' "$bundle/config.json"
fi
exec /usr/sbin/runc "$@"
