# Sourced by the ensure_*.sh scripts: sets SUDO to "" as root, "sudo -n" where sudo is
# available, else prints why the package cannot be installed (naming the install command
# passed as $1) and exits 1.
if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo -n"
else
    echo "$(basename "$0"): this user cannot install packages (run as root: $1)" >&2
    exit 1
fi
