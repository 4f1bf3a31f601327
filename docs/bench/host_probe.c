/* Host-time costs of OpenCL calls and clbt calls on one device: the probe
   behind docs/benchmarks.md's host-time figures (Step). Built by hand:
   gcc -O2 -I include docs/bench/host_probe.c -L build -lclbt -lOpenCL */
#define CL_TARGET_OPENCL_VERSION 300
#include <clbt/clbt.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
#define N 2000
static double med(double *v) { qsort(v, N, sizeof *v, cmp); return v[N / 2]; }
#define TIME(label, setup, body) do { double v[N]; for (int i = 0; i < N; ++i) { setup; double t0 = now(); body; v[i] = now() - t0; clFinish(q);} printf("%-40s %8.2f us\n", label, med(v)); } while (0)
int main(void) {
  clbt_device *dev; if (clbt_device_open(NULL, &dev)) { puts(clbt_last_error()); return 1; }
  cl_context ctx = clbt_device_context(dev); cl_command_queue q = clbt_device_queue(dev); cl_device_id id = clbt_device_id(dev);
  cl_int e;
  const char *src = "__kernel void empty(__global int *a) {}\n__kernel void many(__global int *a, ulong b0, ulong b1, ulong b2, ulong b3, ulong b4, ulong b5, ulong b6, ulong b7, __global int *c, __global int *d, __global int *f, __global int *g) {}";
  cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &e); clBuildProgram(p, 1, &id, "", NULL, NULL);
  cl_kernel k = clCreateKernel(p, "empty", &e), km = clCreateKernel(p, "many", &e);
  cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1 << 20, NULL, &e);
  clSetKernelArg(k, 0, sizeof buf, &buf);
  cl_ulong z = 0; clSetKernelArg(km, 0, sizeof buf, &buf); for (int i = 1; i <= 8; ++i) clSetKernelArg(km, i, 8, &z); for (int i = 9; i < 13; ++i) clSetKernelArg(km, i, sizeof buf, &buf);
  size_t g = 256, l = 256; int host[1024] = {0};
  TIME("enqueue empty kernel", , clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, NULL));
  TIME("enqueue empty kernel + event", cl_event ev, (clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, &ev), clReleaseEvent(ev)));
  TIME("enqueue 13-arg kernel (5 buffers)", , clEnqueueNDRangeKernel(q, km, 1, NULL, &g, &l, 0, NULL, NULL));
  TIME("empty kernel enqueue+finish", , (clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, NULL), clFinish(q)));
  TIME("write 320 B non-blocking", , clEnqueueWriteBuffer(q, buf, CL_FALSE, 0, 320, host, 0, NULL, NULL));
  TIME("write 320 B + kernel, finish", , (clEnqueueWriteBuffer(q, buf, CL_FALSE, 0, 320, host, 0, NULL, NULL), clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, NULL), clFinish(q)));
  size_t sz; cl_context c2;
  TIME("clGetMemObjectInfo x2", , (clGetMemObjectInfo(buf, CL_MEM_SIZE, sizeof sz, &sz, NULL), clGetMemObjectInfo(buf, CL_MEM_CONTEXT, sizeof c2, &c2, NULL)));
  TIME("clSetKernelArg x10 scalar", , for (int i = 1; i <= 8; ++i) clSetKernelArg(km, i, 8, &z));
  TIME("clSetKernelArg x4 buffer", , for (int i = 9; i < 13; ++i) clSetKernelArg(km, i, sizeof buf, &buf));
  cl_event ev0; clEnqueueMarkerWithWaitList(q, 0, NULL, &ev0); clFinish(q); cl_int st;
  TIME("clGetEventInfo", , clGetEventInfo(ev0, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
  /* clbt */
  for (int ng = 1; ng <= 4; ng += 3) {
    clbt_group_config gc[4] = {{.block_size = 16, .max_num_blocks = 8192}, {.block_size = 16, .max_num_blocks = 8192}, {.block_size = 32, .max_num_blocks = 4096}, {.block_size = 64, .max_num_blocks = 2048}};
    clbt_multi_table_config mc = {.max_num_reqs = 1024, .max_num_batched_tokens = 16384, .num_groups = ng, .groups = gc};
    clbt_multi_table *t; if (clbt_multi_table_create(dev, &mc, &t)) { puts(clbt_last_error()); return 1; }
    int32_t qsl[257], idx[256]; int64_t pos[256];
    for (int i = 0; i <= 256; ++i) qsl[i] = i; for (int i = 0; i < 256; ++i) { idx[i] = i; pos[i] = 0; }
    cl_mem mq = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, sizeof qsl, qsl, &e), mp = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, sizeof pos, pos, &e), mi = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, sizeof idx, idx, &e);
    clbt_step s = CLBT_STEP_INIT; s.num_reqs = 256; s.num_tokens = 256; s.query_start_loc = mq; s.positions = mp;
    char label[64];
    snprintf(label, sizeof label, "%d group(s): slot mapping call", ng);
    TIME(label, , clbt_multi_table_enqueue_slot_mapping(t, 256, mq, mp, 256, 0, NULL, NULL));
    snprintf(label, sizeof label, "%d group(s): step v1, no changes", ng);
    TIME(label, , clbt_multi_table_enqueue_step(t, &s, 0, NULL, NULL));
    s.idx_mapping = mi; s.flags = CLBT_STEP_GATHER;
    snprintf(label, sizeof label, "%d group(s): step gather, no changes", ng);
    TIME(label, , clbt_multi_table_enqueue_step(t, &s, 0, NULL, NULL));
    int32_t id1 = 7; const int32_t *ids[4] = {&id1, &id1, &id1, &id1}; size_t cnt[4] = {1, 1, 1, 1};
    snprintf(label, sizeof label, "%d group(s): append 1 row (host)", ng);
    TIME(label, if (i % 64 == 0) clbt_multi_table_clear(t), clbt_multi_table_append_row(t, i % 256, ids, cnt));
    snprintf(label, sizeof label, "%d group(s): step gather, 1 row changed", ng);
    TIME(label, (clbt_multi_table_clear_row(t, i % 256), clbt_multi_table_append_row(t, i % 256, ids, cnt)), clbt_multi_table_enqueue_step(t, &s, 0, NULL, NULL));
    snprintf(label, sizeof label, "%d group(s): step+finish, 1 row changed", ng);
    TIME(label, (clbt_multi_table_clear_row(t, i % 256), clbt_multi_table_append_row(t, i % 256, ids, cnt)), (clbt_multi_table_enqueue_step(t, &s, 0, NULL, NULL), clFinish(q)));
    clReleaseMemObject(mq); clReleaseMemObject(mp); clReleaseMemObject(mi); clbt_multi_table_destroy(t);
  }
  return 0;
}
