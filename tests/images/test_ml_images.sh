#!/usr/bin/env bash
# The ML images of images/ (built by `make images`), a session of each:
# - Debian's CPU PyTorch images (images/python-ml): a small tensor
#   computation, torch.__version__ and the installed python3-torch
#   package's version, which is what the launcher shows (Debian's 1.13.1
#   build calls itself 1.13.0a0), scikit-learn, Python and Jupyter;
# - the CUDA images, where built: they need what this machine may lack (a
#   pip index, the cuDNN archive: `tessera image build --check` says what),
#   so each is checked when it is there and skipped, with the reason,
#   when not: Debian's CUDA PyTorch (torch built for CUDA 12.4, cuDNN
#   found), PyTorch and TensorFlow from the site's index (their versions,
#   the CUDA their wheels were built for, a computation) and, in those two,
#   MLflow: its service definition, and the MLflow UI app opened through
#   the proxy answers with MLflow's own page.
# - a 2-container cluster session of Debian's PyTorch 2.6 whose containers
#   do a torch.distributed all-reduce with the gloo backend (issue 33).
# Every image declares only the apps it has, and its CUDA label.
# `make images-test` runs it and requires the CPU images
# (TESSERA_ML_IMAGES_REQUIRED=1); as a Meson test it is skipped when none
# is built, so that `make test` never builds GBs of images, and checks
# those that are built when only some are.
. "$(dirname "$0")/../e2e/lib.sh"

# image, python3-torch version, scikit-learn version, Python version
CASES=(
	"tessera/python-ml:3.11-torch1.13 1.13.1 1.2. 3.11."
	"tessera/python-ml:3.13-torch2.6 2.6.0 1.4. 3.13."
)
CUDA_DEBIAN=tessera/python-ml:3.13-torch2.6-cuda12.4
CUDA_TORCH=tessera/python-pytorch:3.13-torch2.6-cuda12.4
CUDA_TF=tessera/python-tensorflow:3.13-tf2.20
# Built from the recipe as it is now: an image from an older recipe (one
# that declared other apps, say) is not what the recipe makes, so it is
# left out here like a missing one ('make images' rebuilds it).
SRC=$(cd "$(dirname "$0")/../.." && pwd)
built() {
	local name=${1%%:*} tag=${1##*:} state
	docker image inspect "$1" >/dev/null 2>&1 || return 1
	state=$("$TESSERA" image build --check "$SRC/images/${name#*/}/$tag.recipe" 2>/dev/null | cut -d' ' -f3-)
	[[ $state == "up to date" ]] || { echo "# $1 is $state: built from an older recipe"; return 1; }
}

missing=() present=()
for c in "${CASES[@]}"; do
	read -r image _ <<<"$c"
	if built "$image"; then present+=("$c"); else missing+=("$image"); fi
done
if ((${#missing[@]})); then
	if [[ -n "${TESSERA_ML_IMAGES_REQUIRED:-}" ]]; then
		echo "FAIL not built: ${missing[*]} (run 'make images' as root)"
		exit 1
	fi
	if ((${#present[@]} == 0)); then
		echo "skip: not built: ${missing[*]} ('make images' builds them)"
		exit 77
	fi
	# Some are: those are checked, the others named.
	echo "# skip: not built: ${missing[*]} ('make images' builds them)"
	CASES=("${present[@]}")
fi

e2e_setup
start_server --app-ports "$(e2e_free_port_range 8)" --registry none || { e2e_done; exit 1; }
label() { docker image inspect --format "{{index .Config.Labels \"$2\"}}" "$1"; }

PROBE='
import subprocess, torch, sklearn
a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
b = torch.ones(3, 2)
c = (a @ b).sum().item()
pkg = subprocess.run(["dpkg-query", "--show", "--showformat=${Version}", "python3-torch"],
                     capture_output=True, text=True).stdout
print("torch.__version__", torch.__version__)
print("python3-torch", pkg)
print("sklearn", sklearn.__version__)
print("matmul-sum", c)
'
n=0
for c in "${CASES[@]}"; do
	read -r image torch_pkg sklearn_ver py_ver <<<"$c"
	n=$((n + 1))
	name=ml$n
	"$TESSERA" session create "$image" --name "$name" --cpu 1 --mem 2g --wait >/dev/null 2>&1
	check "a session of $image starts" wait_status "$name" RUNNING
	out=$("$TESSERA" session exec "$name" --timeout 300 -- python3 -c "$PROBE" 2>&1)
	echo "$out" | sed "s|^|# $image: |"
	check "$image: a tensor computation gives 30" has_line "$out" "matmul-sum 30.0"
	check "$image: python3-torch is $torch_pkg" has_prefix_line "$out" "python3-torch $torch_pkg"
	check "$image: torch.__version__ is printed" has_prefix_line "$out" "torch.__version__ ${torch_pkg%.*}"
	check "$image: scikit-learn $sklearn_ver" has_prefix_line "$out" "sklearn $sklearn_ver"
	ver=$("$TESSERA" session exec "$name" -- python3 --version 2>&1)
	check "$image: Python $py_ver ($ver)" contains "$ver" "Python $py_ver"
	ver=$("$TESSERA" session exec "$name" -- jupyter notebook --version 2>&1)
	check "$image: Jupyter Notebook 6.4 ($ver)" contains "$ver" "6.4."
	fw=$(label "$image" tessera.frameworks)
	check "$image: the launcher's label says torch=$torch_pkg ($fw)" contains "$fw" ",torch=$torch_pkg,"
	ports=$(label "$image" ai.backend.service-ports)
	check "$image: Jupyter and sshd are declared, the apps it has ($ports)" [ "$ports" == "jupyter:http:8081,sshd:tcp:2200" ]
	check "$image: no CUDA label (a CPU build)" [ -z "$(label "$image" tessera.cuda)" ]
	"$TESSERA" session rm "$name" >/dev/null
done

# ---- a cluster session doing a torch.distributed all-reduce ----
# Two containers of Debian's PyTorch 2.6 (docs/user-guide.md, "Distributed
# training"): each joins the process group from the variables the
# session sets (env://: MASTER_ADDR=main1, MASTER_PORT, WORLD_SIZE, RANK)
# with the gloo backend and adds rank + 1: 1 + 2 = 3 in both. sub1's runs
# in the background while main1's is started (the rendezvous waits for
# both).
DIST_IMAGE=tessera/python-ml:3.13-torch2.6
if built "$DIST_IMAGE"; then
	# The recipe sets USE_LIBUV=0 (Debian's torch has no libuv, which
	# TCPStore asks for by default since 2.4); an image built before that
	# line lacks it, so the session passes it then.
	libuv=()
	docker image inspect -f '{{json .Config.Env}}' "$DIST_IMAGE" | grep -q '"USE_LIBUV=0"' ||
		libuv=(--env USE_LIBUV=0)
	"$TESSERA" session create "$DIST_IMAGE" --name dist --cluster-size 2 --cpu 1 --mem 2g "${libuv[@]}" \
		--wait --timeout 300 >/dev/null 2>&1
	check "a 2-container session of $DIST_IMAGE starts (${libuv[*]})" wait_status dist RUNNING
	ALLREDUCE='
import os, socket, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="env://", timeout=__import__("datetime").timedelta(seconds=120))
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t, op=dist.ReduceOp.SUM)
print("rank %d of %d on %s: sum %g" % (dist.get_rank(), dist.get_world_size(), socket.gethostname(), t.item()))
dist.destroy_process_group()
'
	"$TESSERA" session exec dist --container sub1 --timeout 200 -- python3 -c "$ALLREDUCE" >"$E2E_DIR/sub1.out" 2>&1 &
	sub_pid=$!
	out=$("$TESSERA" session exec dist --timeout 200 -- python3 -c "$ALLREDUCE" 2>&1)
	wait "$sub_pid"
	sub_out=$(cat "$E2E_DIR/sub1.out")
	echo "$out" | tail -5 | sed 's|^|# main1: |'
	echo "$sub_out" | tail -5 | sed 's|^|# sub1: |'
	check "$DIST_IMAGE: main1's all-reduce with gloo sums 1 + 2" has_line "$out" "rank 0 of 2 on main1: sum 3"
	check "$DIST_IMAGE: sub1's too" has_line "$sub_out" "rank 1 of 2 on sub1: sum 3"
	"$TESSERA" session rm dist >/dev/null
else
	e2e_log "skip the all-reduce: $DIST_IMAGE is not built"
fi

# ---- the CUDA images, where built ----

# mlflow_app NAME IMAGE: the image's MLflow and its UI through the proxy.
mlflow_app() {
	local name=$1 image=$2 out
	out=$("$TESSERA" session exec "$name" -- python3 -c 'import json, mlflow
d = json.load(open("/etc/backend.ai/service-defs/mlflow-ui.json"))
print("mlflow", mlflow.__version__)
print("command", " ".join(d["command"]))' 2>&1)
	echo "$out" | sed "s|^|# $image: |"
	check "$image: MLflow 3 imports" has_prefix_line "$out" "mlflow 3\."
	check "$image: its service definition runs mlflow ui" \
		has_line "$out" "command mlflow ui --host 127.0.0.1 --port {ports[0]}"
	open_app "$name" mlflow-ui
	check "$image: session app mlflow-ui sets the app's cookie ($SETUP)" bash -c '[ "$1" == 302 ] && [ -n "$2" ]' _ "$SETUP" "$COOKIE"
	poll "$ORIGIN" / "$COOKIE"
	check "$image: the MLflow UI answers 200 through the proxy once started (seen:$SEEN)" [ $? -eq 0 ]
	check "$image: with MLflow's own page" grep -qi "mlflow" "$E2E_DIR/body"
}

if built "$CUDA_DEBIAN"; then
	image=$CUDA_DEBIAN
	"$TESSERA" session create "$image" --name cd --cpu 1 --mem 2g --wait >/dev/null 2>&1
	check "a session of $image starts" wait_status cd RUNNING
	out=$("$TESSERA" session exec cd --timeout 300 -- python3 -c 'import subprocess, torch
pkg = subprocess.run(["dpkg-query", "--show", "--showformat=${Version}", "python3-torch-cuda"],
                     capture_output=True, text=True).stdout
print("python3-torch-cuda", pkg)
print("torch.version.cuda", torch.version.cuda)
print("cudnn", torch.backends.cudnn.version())
print("sum", torch.ones(2, 3).sum().item())
print("cuda.is_available", torch.cuda.is_available())' 2>&1)
	echo "$out" | sed "s|^|# $image: |"
	check "$image: python3-torch-cuda 2.6.0" has_prefix_line "$out" "python3-torch-cuda 2\.6\.0"
	check "$image: torch is built for CUDA 12.4" has_line "$out" "torch.version.cuda 12.4"
	check "$image: torch finds cuDNN 9.0 (the site's archive)" has_line "$out" "cudnn 90000"
	check "$image: a computation on the CPU" has_line "$out" "sum 6.0"
	check "$image: tessera.cuda is 12.4" [ "$(label "$image" tessera.cuda)" == "12.4" ]
	check "$image: Jupyter and sshd are declared" [ "$(label "$image" ai.backend.service-ports)" == "jupyter:http:8081,sshd:tcp:2200" ]
	"$TESSERA" session rm cd >/dev/null
else
	e2e_log "skip $CUDA_DEBIAN: not built (it needs the cuDNN archive: tessera image build --site-file PATH)"
fi

if built "$CUDA_TORCH"; then
	image=$CUDA_TORCH
	"$TESSERA" session create "$image" --name ct --cpu 1 --mem 2g --wait >/dev/null 2>&1
	check "a session of $image starts" wait_status ct RUNNING
	out=$("$TESSERA" session exec ct --timeout 300 -- python3 -c 'import torch
print("torch", torch.__version__)
print("torch.version.cuda", torch.version.cuda)
print("cudnn", torch.backends.cudnn.version())
print("sum", torch.ones(2, 3).sum().item())' 2>&1)
	echo "$out" | sed "s|^|# $image: |"
	check "$image: torch 2.6" has_prefix_line "$out" "torch 2\.6\."
	check "$image: built for CUDA 12.4" has_line "$out" "torch.version.cuda 12.4"
	check "$image: cuDNN 9 from its wheels" has_prefix_line "$out" "cudnn 9[0-9][0-9][0-9][0-9]"
	check "$image: a computation on the CPU" has_line "$out" "sum 6.0"
	check "$image: tessera.cuda is 12.4" [ "$(label "$image" tessera.cuda)" == "12.4" ]
	fw=$(label "$image" tessera.frameworks)
	check "$image: the launcher's label has pip's torch and mlflow ($fw)" bash -c '[[ "$1" == *,torch=2.6.* && "$1" == *,mlflow=3.* ]]' _ "$fw"
	check "$image: Jupyter and the MLflow UI are declared" \
		[ "$(label "$image" ai.backend.service-ports)" == "jupyter:http:8081,mlflow-ui:http:5000,sshd:tcp:2200" ]
	mlflow_app ct "$image"
	"$TESSERA" session rm ct >/dev/null
else
	e2e_log "skip $CUDA_TORCH: not built (it needs a pip index: tessera image build --pip-index URL)"
fi

if built "$CUDA_TF"; then
	image=$CUDA_TF
	"$TESSERA" session create "$image" --name tf --cpu 1 --mem 2g --wait >/dev/null 2>&1
	check "a session of $image starts" wait_status tf RUNNING
	out=$("$TESSERA" session exec tf --timeout 300 -- python3 -c 'import tensorflow as tf
print("tensorflow", tf.__version__)
print("cuda", tf.sysconfig.get_build_info().get("cuda_version"))
print("sum", float(tf.reduce_sum(tf.ones((2, 3)))))' 2>&1)
	echo "$out" | sed "s|^|# $image: |"
	check "$image: TensorFlow 2.20" has_prefix_line "$out" "tensorflow 2\.20\."
	check "$image: built for CUDA 12.5" has_prefix_line "$out" "cuda 12\.5"
	check "$image: a computation on the CPU" has_line "$out" "sum 6.0"
	check "$image: tessera.cuda is 12.5" [ "$(label "$image" tessera.cuda)" == "12.5" ]
	check "$image: Jupyter and the MLflow UI are declared" \
		[ "$(label "$image" ai.backend.service-ports)" == "jupyter:http:8081,mlflow-ui:http:5000,sshd:tcp:2200" ]
	mlflow_app tf "$image"
	"$TESSERA" session rm tf >/dev/null
else
	e2e_log "skip $CUDA_TF: not built (it needs a pip index: tessera image build --pip-index URL)"
fi
e2e_done
