#!/usr/bin/env bash
# Unpacks the Vulkan headers ggml-vulkan needs into .cache/vulkan/ and prints their include folder.
# Debian 12's libvulkan-dev (1.3.239) is older than the headers ggml 0.23's Vulkan backend is written
# against (it uses vulkan.hpp names added in 1.3.2xx-1.4); Debian 13's libvulkan-dev 1.4.309 has them.
# Only its headers are used (no library, nothing installed on the system): the package is downloaded
# with apt from Debian 13's suite of the archive this machine already uses (its URI read from the
# system's apt sources), with a private apt state in .cache/vulkan-apt, and unpacked with dpkg -x.
# The program links Debian 12's libvulkan1 loader, which runs any ICD (Mesa's llvmpipe in CI).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache="${ONNX2GGML_CACHE:-$here/.cache}"
dest="$cache/vulkan"
PIN="libvulkan-dev=1.4.309.0-1"
if [ -f "$dest/usr/include/vulkan/vulkan.hpp" ] && grep -q "VK_HEADER_VERSION 309" "$dest/usr/include/vulkan/vulkan_core.h"; then
  echo "$dest/usr/include"; exit 0
fi
apt_dir="$cache/vulkan-apt"
rm -rf "$apt_dir" "$dest"
mkdir -p "$apt_dir/parts" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$dest"
# the archive's URI: the first `URIs:` of a deb822 sources file, else the first `deb` line's
uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
[ -n "$uri" ] || uri=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' \
                          /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
[ -n "$uri" ] || { echo "fetch-vulkan-headers: no Debian archive URI in the apt sources" >&2; exit 1; }
printf 'Types: deb\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
  "$uri" >"$apt_dir/parts/trixie.sources"
opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$apt_dir/parts" -o "Dir::State::Lists=$apt_dir/lists"
      -o "Dir::Cache=$apt_dir/cache" -o APT::Sandbox::User=root)
apt-get "${opts[@]}" update -qq >&2
(cd "$apt_dir" && { apt-get "${opts[@]}" download -qq "$PIN" >&2 || apt-get "${opts[@]}" download -qq libvulkan-dev >&2; })
dpkg -x "$apt_dir"/libvulkan-dev_*.deb "$dest"
[ -f "$dest/usr/include/vulkan/vulkan.hpp" ] || { echo "fetch-vulkan-headers: no vulkan.hpp in the package" >&2; exit 1; }
rm -rf "$apt_dir"
echo "$dest/usr/include"
