# need.sh — sourced by demo.sh and test.sh: make sure Debian packages are installed.
#   need PKG...   installs the missing ones with apt-get when run as root on Debian; otherwise
#                 says exactly what to install and exits 1.
need() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null && return 0
    echo "apt-get could not install: ${missing[*]}" >&2
    exit 1
  fi
  echo "install first (as root): apt-get install ${missing[*]}" >&2
  exit 1
}

# nvcc for the CUDA samples, the toolkit's headers for the shim (the CUDA 13 toolkit is not a
# Debian package here: it comes from NVIDIA's installer, usually under /usr/local/cuda).
find_cuda() {
  command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
  if ! command -v nvcc >/dev/null && [ ! -f /usr/local/cuda/include/cuda_runtime_api.h ]; then
    echo "the CUDA 13 toolkit is needed (its headers, and nvcc for the samples): install it and put nvcc on PATH" >&2
    exit 1
  fi
}
