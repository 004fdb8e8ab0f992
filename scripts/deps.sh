#!/usr/bin/env bash
# Installs what `make run` and `make test` need on a fresh Debian or Ubuntu
# machine, skipping whatever is already there, so running it again costs
# a second. Only root installs system packages; anyone else is told what to
# install. Go itself is checked, never installed: Debian's golang package is
# older than the release go.mod names.
#
#   scripts/deps.sh go      only check that Go is there and new enough
#   scripts/deps.sh run     PostgreSQL server binaries (unless DATABASE_URL is set)
#   scripts/deps.sh test    the above, Debian's chromium, node and npm, pgbouncer
#                           (the suite runs the worker and console through one),
#                           python3-celery, python3-redis, redis-server and
#                           rabbitmq-server (the Celery integration's tests), and
#                           the Playwright driver in .cache/playwright-driver/<version>
#                           and axe-core (npm) in .cache/axe-core/<version>
#
# The driver folder is printed on the last line of `test` for the Makefile.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "deps: $*" >&2; }

# check_go stops with a message that says where to get Go when the go
# command (GO, default go) is missing or older than the go line of go.mod.
# A Go from 1.21 on that is older fetches the newer toolchain by itself
# (GOTOOLCHAIN=auto) and reports that one, which is fine.
check_go() {
	local go=${GO:-go} want have out
	want=$(sed -n 's/^go \([0-9][0-9.]*\)$/\1/p' go.mod)
	if ! command -v "$go" >/dev/null; then
		if [ -x /usr/local/go/bin/go ]; then
			say "Redrive needs Go $want or newer. There is no $go on your PATH, but /usr/local/go/bin/go exists:"
			say "  export PATH=/usr/local/go/bin:\$PATH"
			exit 1
		fi
		say "Redrive needs Go $want or newer, and there is no $go on your PATH."
		where_to_get_go "$want"
	fi
	if ! out=$("$go" version 2>&1); then
		say "Redrive needs Go $want or newer; '$go version' failed: $out"
		where_to_get_go "$want"
	fi
	have=$(sed -n 's/^go version \(devel \)\{0,1\}go\([0-9][0-9.]*\).*/\2/p' <<<"$out")
	if [ -z "$have" ] || ! version_at_least "$have" "$want"; then
		say "Redrive needs Go $want or newer; $(command -v "$go") says: $out"
		where_to_get_go "$want"
	fi
}

# where_to_get_go says how to install Go $1 and exits. Not from apt: the
# golang package of Debian 12 is Go 1.19.
where_to_get_go() {
	local arch sudo=sudo
	[ "$(id -u)" = 0 ] && sudo=
	case "$(uname -m)" in
	x86_64) arch=amd64 ;;
	aarch64 | arm64) arch=arm64 ;;
	*) arch="<arch>" ;;
	esac
	cat >&2 <<-EOF
		deps: Debian's and Ubuntu's golang packages are too old. Get Go $1 or newer from https://go.dev/dl/, for example:
		  curl -fsSLO https://go.dev/dl/go$1.linux-$arch.tar.gz
		  ${sudo:+$sudo }rm -rf /usr/local/go && ${sudo:+$sudo }tar -C /usr/local -xzf go$1.linux-$arch.tar.gz
		  export PATH=/usr/local/go/bin:\$PATH
		then run make again.
	EOF
	exit 1
}

# version_at_least reports whether dotted version $1 >= $2 (1.26 = 1.26.0).
version_at_least() {
	local -a a b
	IFS=. read -ra a <<<"$1"
	IFS=. read -ra b <<<"$2"
	local i
	for i in 0 1 2; do
		if ((${a[i]:-0} != ${b[i]:-0})); then
			((${a[i]:-0} > ${b[i]:-0}))
			return
		fi
	done
}

# has_postgres mirrors localpg.FindBinDir: initdb in `pg_config --bindir`,
# else in one of Debian's versioned folders.
has_postgres() {
	local dir
	if dir=$(pg_config --bindir 2>/dev/null) && [ -x "$dir/initdb" ]; then
		return 0
	fi
	for dir in /usr/lib/postgresql/*/bin; do
		[ -x "$dir/initdb" ] && return 0
	done
	return 1
}

# missing_packages prints the apt packages the given target lacks.
missing_packages() {
	local target=$1 pkgs=()
	if [ -z "${DATABASE_URL:-}" ] && ! has_postgres; then
		pkgs+=(postgresql)
	fi
	if [ "$target" = test ]; then
		dpkg -s chromium >/dev/null 2>&1 || pkgs+=(chromium)
		command -v node >/dev/null || pkgs+=(nodejs)
		command -v npm >/dev/null || pkgs+=(npm)
		# In /usr/sbin, which a normal user's PATH may lack.
		command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || pkgs+=(pgbouncer)
		# The Celery integration runs on Debian's own Python and Celery
		# (integrations/celery), against a Redis the tests start.
		/usr/bin/python3 -c 'import celery, redis' 2>/dev/null || pkgs+=(python3-celery python3-redis)
		command -v redis-server >/dev/null || [ -x /usr/bin/redis-server ] || pkgs+=(redis-server)
		# RabbitMQ, Celery's other broker: the replay test runs on both.
		[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || pkgs+=(rabbitmq-server)
	fi
	echo "${pkgs[@]}"
}

install_packages() {
	local pkgs=("$@")
	[ ${#pkgs[@]} -eq 0 ] && return 0
	if [ "$(id -u)" != 0 ]; then
		say "missing: ${pkgs[*]}"
		say "install them, for example: sudo apt-get install -y ${pkgs[*]}"
		exit 1
	fi
	say "installing ${pkgs[*]} (apt-get)"
	# One update for the whole install; a fresh machine's package lists are empty.
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
	if [[ " ${pkgs[*]} " == *" postgresql "* ]] && ! has_postgres; then
		say "postgresql installed but no initdb found"
		exit 1
	fi
}

# playwright_version reads the Playwright release the playwright-go module
# pins (playwrightCliVersion in its run.go): the driver must match exactly.
playwright_version() {
	local module=github.com/playwright-community/playwright-go dir
	go mod download "$module" # a no-op once it is in the module cache
	dir=$(go list -m -f '{{.Dir}}' "$module")
	if [ ! -f "$dir/run.go" ]; then
		say "cannot find $module in the module cache"
		exit 1
	fi
	sed -n 's/^const playwrightCliVersion = "\(.*\)"$/\1/p' "$dir/run.go"
}

# install_driver lays out the driver folder playwright-go expects: node (the
# system one) and package/ (the npm package playwright-core, same version).
# It prints the folder.
install_driver() {
	local version dir want
	version=$(playwright_version)
	if [ -z "$version" ]; then
		say "cannot read playwrightCliVersion from the playwright-go module"
		exit 1
	fi
	dir="$PWD/.cache/playwright-driver/$version"
	want="Version $version"
	if [ "$("$dir/node" "$dir/package/cli.js" --version 2>/dev/null)" != "$want" ]; then
		say "installing playwright-core@$version into $dir (npm)"
		mkdir -p "$dir"
		npm install --prefix "$dir/npm" --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
			"playwright-core@$version" >&2
		ln -sfn npm/node_modules/playwright-core "$dir/package"
		ln -sfn "$(command -v node)" "$dir/node"
	fi
	local got
	got=$("$dir/node" "$dir/package/cli.js" --version)
	if [ "$got" != "$want" ]; then
		say "driver in $dir reports \"$got\", want \"$want\""
		exit 1
	fi
	echo "$dir"
}

# axeVersion is the axe-core release the accessibility browser test injects
# (e2e/axe_test.go finds it in .cache/axe-core/<version>).
axeVersion=4.14.1

# install_axe puts the npm package axe-core beside the driver, in the same
# ignored cache. It prints nothing on stdout: the last line there is the
# driver folder, for the Makefile.
install_axe() {
	local dir="$PWD/.cache/axe-core/$axeVersion"
	if [ ! -f "$dir/node_modules/axe-core/axe.min.js" ]; then
		say "installing axe-core@$axeVersion into $dir (npm)"
		mkdir -p "$dir"
		npm install --prefix "$dir" --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
			"axe-core@$axeVersion" >&2
	fi
}

case "${1:-}" in
go)
	check_go
	;;
run)
	check_go
	read -ra pkgs <<<"$(missing_packages run)"
	install_packages "${pkgs[@]}"
	;;
test)
	check_go
	read -ra pkgs <<<"$(missing_packages test)"
	install_packages "${pkgs[@]}"
	install_axe
	install_driver
	;;
*)
	echo "usage: $0 go|run|test" >&2
	exit 2
	;;
esac
