#!/usr/bin/env bash
# The context-parallel MPI example on one machine's GPUs, one rank per GPU.
#
#   tools/gpu/context_parallel.sh OUT_DIR [RANKS] [STEPS] [DEBS_DIR]
#
# Registers NVIDIA's OpenCL driver, builds clbt and
# examples/context_parallel_mpi.c without the tests, and runs the example
# with RANKS ranks (default 2, so cp_world_size 2) and STEPS steps (default
# 200), interleave 1 and then 16, then one rank alone as the baseline.
# CLBT_DEVICE is left unset so that the i-th rank takes GPU i. A machine
# without MPI gets Open MPI from Debian 12's .deb files in DEBS_DIR
# (default build-debs), unpacked under /tmp/mpi; docs/scaling.md lists them.
# Everything printed lands in OUT_DIR; exits 1 when any run fails a check.
set -euo pipefail
out=$1 ranks=${2:-2} steps=${3:-200} debs=${4:-build-debs}
mkdir -p "$out" /tmp/vendors
echo /usr/lib/libnvidia-opencl.so.1 > /tmp/vendors/nvidia.icd
cp /etc/OpenCL/vendors/pocl.icd /tmp/vendors/ 2>/dev/null || true
export OCL_ICD_VENDORS=/tmp/vendors
unset CLBT_DEVICE

# One machine: ranks start without ssh and talk through shared memory only
# (no single-copy mechanism, which containers often forbid); as root too.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  OMPI_MCA_plm=isolated OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader \
  OMPI_MCA_btl_vader_single_copy_mechanism=none \
  PMIX_MCA_pcompress_base_silence_warning=1

mpirun=mpirun
mpi_options=()
if ! mpicc --version > /dev/null 2>&1; then
  root=/tmp/mpi
  for deb in "$debs"/*.deb; do dpkg -x "$deb" "$root"; done
  lib=$root/usr/lib/x86_64-linux-gnu
  export OPAL_PREFIX=$root/usr PATH=$root/usr/bin:$PATH \
    LD_LIBRARY_PATH=$lib:$root/lib/x86_64-linux-gnu:$lib/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    PMIX_MCA_mca_base_component_path=$lib/pmix2/lib/pmix
  mpirun=mpirun.openmpi
  mpi_options=(-DMPI_C_COMPILER="$root/usr/bin/mpicc.openmpi"
               -DMPIEXEC_EXECUTABLE="$root/usr/bin/mpiexec.openmpi")
fi

cmake -S . -B build-mpi -DCLBT_BUILD_TESTS=OFF "${mpi_options[@]}" \
  > "$out/build.txt" 2>&1
cmake --build build-mpi -j"$(nproc)" >> "$out/build.txt" 2>&1
./build-mpi/clbt devices | tee "$out/devices.txt"
# The machine's image lists its ICDs in OCL_ICD_FILENAMES, and the ranks
# that mpirun starts saw only its first entry (PoCL): name both again on the
# ranks' own command line.
example=(env OCL_ICD_FILENAMES=/usr/lib/libnvidia-opencl.so.1:libpocl.so.2
         build-mpi/examples/context_parallel_mpi)
status=0
for interleave in 1 16; do
  "$mpirun" -n "$ranks" "${example[@]}" --interleave "$interleave" \
    --steps "$steps" 2>&1 | tee "$out/ranks${ranks}_interleave${interleave}.txt" ||
    status=1
done
"$mpirun" -n 1 "${example[@]}" --steps "$steps" 2>&1 | tee "$out/ranks1.txt" ||
  status=1
exit $status
