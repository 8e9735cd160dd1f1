#!/usr/bin/env bash
# What goes into session containers (the fGPU shim, gpu-info, the mock
# driver and NVML) must load with an image's older glibc: the dynamic
# loader refuses an object that asks for a symbol version its C library
# does not define, and through /etc/ld.so.preload that stops every program
# in the container. This checks what the built files ask for: no glibc
# version newer than 2.17 (CentOS 7's; Debian 11 and Ubuntu 20.04 have
# 2.31), and libdl.so.2 / libpthread.so.0 listed where glibc before 2.34
# keeps the functions they use (src/gpuabi/glibc_compat.h).
#
#   test_glibc_compat.sh FILE...
set -uo pipefail
MAX=2.17
fail=0
for f in "$@"; do
	newest=$(objdump -T "$f" | grep -o '(GLIBC_[0-9.]*)' | tr -d '()' | sed 's/GLIBC_//' |
		sort -Vu | tail -1)
	if [[ -z $newest ]]; then
		echo "FAIL $f: no glibc symbol versions found (objdump -T)"; fail=1; continue
	fi
	if [[ $(printf '%s\n%s\n' "$newest" "$MAX" | sort -V | tail -1) != "$MAX" ]]; then
		echo "FAIL $f asks for GLIBC_$newest, newer than $MAX:"
		objdump -T "$f" | grep -F "GLIBC_$newest" | sed 's/^/     /'
		fail=1
		continue
	fi
	needed=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
	for lib in libdl.so.2 libpthread.so.0; do
		if [[ " $needed" != *" $lib "* ]]; then
			echo "FAIL $f does not list $lib (lists: $needed)"; fail=1
		fi
	done
	echo "ok   $f: newest glibc version asked for is $newest; needs $needed"
done
exit $fail
