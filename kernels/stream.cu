// STREAM kernels (McCalpin; after the CUDA variants of BabelStream, UoB-HPC/BabelStream src/cuda/CUDAStream.cu)
// over double arrays, grid-stride loops. Compiled at run time by cupy.RawModule (kernels/stream.py).
// Bytes moved per call, STREAM convention (no write-allocate traffic): copy/scale 2*8*n,
// add/triad 3*8*n, dot 2*8*n.

extern "C" {

__global__ void stream_copy(const double* __restrict__ a, double* __restrict__ c, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x)
        c[i] = a[i];
}

__global__ void stream_scale(double* __restrict__ b, const double* __restrict__ c, double scalar, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x)
        b[i] = scalar * c[i];
}

__global__ void stream_add(const double* __restrict__ a, const double* __restrict__ b, double* __restrict__ c, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x)
        c[i] = a[i] + b[i];
}

__global__ void stream_triad(double* __restrict__ a, const double* __restrict__ b, const double* __restrict__ c, double scalar, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x)
        a[i] = b[i] + scalar * c[i];
}

// Dot: each block reduces its grid-stride partial sum in shared memory and writes one partial per block;
// the host (or a second tiny pass) sums the partials. blockDim.x must be a power of two <= 1024.
__global__ void stream_dot(const double* __restrict__ a, const double* __restrict__ b, double* __restrict__ partial, long long n) {
    __shared__ double cache[1024];
    double sum = 0.0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x)
        sum += a[i] * b[i];
    cache[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned int offset = blockDim.x / 2; offset > 0; offset >>= 1) {
        if (threadIdx.x < offset)
            cache[threadIdx.x] += cache[threadIdx.x + offset];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        partial[blockIdx.x] = cache[0];
}

}
