/*
 * Kernels with the faults the Oclgrind stage must see, each run on the
 * first device of the first platform and exiting 0 whatever happened:
 *
 *   faulty_kernels race           work-group 1 reads a word work-group 0
 *                                 writes (a read-write data race)
 *   faulty_kernels out-of-bounds  the last work-item writes one int past
 *                                 its buffer
 *   faulty_kernels api            a clean kernel, after a clSetKernelArg
 *                                 past its arguments (an API error, ignored)
 *   faulty_kernels clean          the clean kernel alone: nothing to report
 *
 * Only Oclgrind's report can tell that anything went wrong, which is what
 * the stage's tests of itself (tests/oclgrind/CMakeLists.txt) prove it
 * notices. Plain OpenCL: no clbt.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <stdio.h>
#include <string.h>

static const char source[] =
    "__kernel void race(__global int *words) {\n"
    "  if (get_group_id(0) == 0) words[0] = 1;\n"
    "  else words[1] = words[0];\n"
    "}\n"
    "__kernel void out_of_bounds(__global int *words) {\n"
    "  words[get_global_id(0) + 1] = 0;\n"
    "}\n"
    "__kernel void clean(__global int *words) {\n"
    "  words[get_global_id(0)] = 1;\n"
    "}\n";

/* Runs `name` over two work-items, one a work-group, on a two-int buffer;
   with `bad_argument`, sets an argument the kernel does not have first. */
static int run(const char *name, int bad_argument) {
  cl_platform_id platform;
  cl_device_id device;
  cl_int error = clGetPlatformIDs(1, &platform, NULL);
  if (!error)
    error = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
  if (error) return fprintf(stderr, "no OpenCL device: %d\n", error), 1;
  cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &error);
  cl_command_queue queue = NULL;
  cl_program program = NULL;
  cl_kernel kernel = NULL;
  cl_mem words = NULL;
  const char *text = source;
  if (!error) queue = clCreateCommandQueue(context, device, 0, &error);
  if (!error)
    program = clCreateProgramWithSource(context, 1, &text, NULL, &error);
  if (!error) error = clBuildProgram(program, 1, &device, "", NULL, NULL);
  if (!error) kernel = clCreateKernel(program, name, &error);
  int zeros[2] = {0, 0};
  if (!error)
    words = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                           sizeof zeros, zeros, &error);
  if (!error && bad_argument) /* the fault: its error is ignored */
    (void)clSetKernelArg(kernel, 7, sizeof words, &words);
  if (!error) error = clSetKernelArg(kernel, 0, sizeof words, &words);
  size_t global = 2, local = 1;
  if (!error)
    error = clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &global, &local, 0,
                                   NULL, NULL);
  if (!error) error = clFinish(queue);
  if (words) clReleaseMemObject(words);
  if (kernel) clReleaseKernel(kernel);
  if (program) clReleaseProgram(program);
  if (queue) clReleaseCommandQueue(queue);
  if (context) clReleaseContext(context);
  if (error) fprintf(stderr, "faulty_kernels %s: OpenCL error %d\n", name, error);
  return error ? 1 : 0;
}

int main(int argc, char **argv) {
  const char *fault = argc == 2 ? argv[1] : "";
  if (strcmp(fault, "race") == 0) return run("race", 0);
  if (strcmp(fault, "out-of-bounds") == 0) return run("out_of_bounds", 0);
  if (strcmp(fault, "api") == 0) return run("clean", 1);
  if (strcmp(fault, "clean") == 0) return run("clean", 0);
  fprintf(stderr, "usage: faulty_kernels race|out-of-bounds|api|clean\n");
  return 2;
}
