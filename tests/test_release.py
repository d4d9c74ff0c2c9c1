# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One version everywhere: galaxy.yml's version is the release the changelog records last (or the next one, while
fragments wait for it), every version_added names a release, the execution environment builds the tarball of that
version, and the changelog a user reads is the one antsibull-changelog renders from changelogs/changelog.yaml."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEMVER = re.compile(r'(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\Z')


def load(path):
    with open(os.path.join(ROOT, path)) as handle:
        return yaml.safe_load(handle)


def version_tuple(version):
    match = SEMVER.match(version)
    assert match, '%r is not a semantic version X.Y.Z' % version
    return tuple(int(part) for part in match.groups())


def galaxy_version():
    return load('galaxy.yml')['version']


def released():
    return sorted(load('changelogs/changelog.yaml').get('releases') or {}, key=version_tuple)


def pending_fragments():
    return [path for path in glob.glob(os.path.join(ROOT, 'changelogs', 'fragments', '*'))
            if not os.path.basename(path).startswith('.')]


def versions_added():
    """(file, version) for every version_added of the plugins' and roles' documentation."""
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, 'plugins', '**', '*.py'), recursive=True)
                       + glob.glob(os.path.join(ROOT, 'plugins', '**', '*.yml'), recursive=True)
                       + glob.glob(os.path.join(ROOT, 'roles', '*', 'meta', 'argument_specs.yml'))):
        with open(path) as handle:
            for version in re.findall(r'^\s*version_added:\s*["\']?([^\s"\']+)', handle.read(), re.M):
                found.append((os.path.relpath(path, ROOT), version))
    return found


def test_galaxy_version_is_the_last_release_or_the_next_one():
    version = galaxy_version()
    releases = released()
    assert releases, 'changelogs/changelog.yaml records no release'
    if pending_fragments():
        # between releases: galaxy.yml names the version being prepared
        assert version_tuple(version) > version_tuple(releases[-1]), (version, releases[-1])
    else:
        assert version == releases[-1], (version, releases[-1])


def test_every_version_added_is_a_release_up_to_galaxy_version():
    known = set(released()) | {galaxy_version()}
    found = versions_added()
    assert len(found) >= 10, found
    wrong = [(path, version) for path, version in found
             if version not in known or version_tuple(version) > version_tuple(galaxy_version())]
    assert wrong == [], 'version_added must be a release of changelogs/changelog.yaml or %s' % galaxy_version()


def test_the_execution_environment_installs_this_version():
    with open(os.path.join(ROOT, 'playbooks', 'awx', 'execution-environment.yml')) as handle:
        text = handle.read()
    named = set(re.findall(r'kubehw-devices-([0-9.]+)\.tar\.gz', text)) | set(re.findall(r'kubehw-devices-ee:(\S+)', text))
    assert named == {galaxy_version()}


def test_changelog_rst_is_rendered_from_the_release_data(tmp_path):
    """antsibull-changelog renders CHANGELOG.rst from changelogs/changelog.yaml; the committed one is that render."""
    command = os.path.join(os.path.dirname(sys.executable), 'antsibull-changelog')
    with open(os.path.join(ROOT, 'CHANGELOG.rst')) as handle:
        committed = handle.read()
    assert 'v%s\n' % released()[-1] in committed
    proc = subprocess.run([command, 'lint-changelog-yaml', os.path.join(ROOT, 'changelogs', 'changelog.yaml')],
                          capture_output=True, text=True, check=False)
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, '')
    copy = tmp_path / 'devices'
    os.makedirs(str(copy / 'changelogs'))
    for name in ('galaxy.yml',):
        with open(os.path.join(ROOT, name)) as src:
            (copy / name).write_text(src.read())
    for name in ('config.yaml', 'changelog.yaml'):
        with open(os.path.join(ROOT, 'changelogs', name)) as src:
            (copy / 'changelogs' / name).write_text(src.read())
    (copy / 'changelogs' / 'fragments').mkdir()
    proc = subprocess.run([command, 'generate'], cwd=str(copy), capture_output=True, text=True, check=False,
                          env=dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ['PATH']))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (copy / 'CHANGELOG.rst').read_text() == committed
