// Multi-tensor launch: the chunk table passed BY VALUE as a kernel argument,
// in the manner of apex's multi_tensor_apply.
//
// One launch covers a list of tensors: block b processes chunk
// block_to_chunk[b] (MTA_CHUNK_SIZE elements) of tensor block_to_tensor[b].
// The host (minitorch_accum/kernels/launch_plan.py, shared by the CuPy path
// and the CPU launch emulator) fills tables and launches again when one fills.
// The table has to fit in the 4 KiB of kernel parameters every GPU accepts, so
// deeper tables (more pointers per tensor) hold fewer tensors. Its NumPy twin
// is launch_plan.table_dtype(depth); a test compares both layouts.
#pragma once

#include "accum_math.cuh"

#define MTA_CHUNK_SIZE 65536
#define MTA_MT_BLOCK 512
#define MTA_MT_MAX_BLOCKS 320

template <int DEPTH>
struct MtaTableCapacity;
template <> struct MtaTableCapacity<1> { static constexpr int tensors = 110; };
template <> struct MtaTableCapacity<2> { static constexpr int tensors = 64; };
template <> struct MtaTableCapacity<3> { static constexpr int tensors = 48; };
template <> struct MtaTableCapacity<4> { static constexpr int tensors = 36; };

template <int DEPTH>
struct MtaTensorTable {
    static constexpr int max_tensors = MtaTableCapacity<DEPTH>::tensors;
    mta_u64 addresses[DEPTH][max_tensors];  // row d: the d-th array of each tensor
    mta_i64 sizes[max_tensors];             // elements; 64-bit so one tensor may pass 2^31
    mta_u8 kinds[max_tensors];              // MtaKind of the tensor's dtype (pair)
    mta_u8 block_to_tensor[MTA_MT_MAX_BLOCKS];
    int block_to_chunk[MTA_MT_MAX_BLOCKS];
};

// Kind codes. Accumulation kernels key on the (accumulator, gradient) pair;
// single-array kernels (the L2 norm) on the array's dtype. The numbering is
// shared so a pair's code names its gradient dtype for fp32 accumulators.
// bfloat16 accumulators (summed in float32, each sum rounded back) come last:
// the compensated kernels take none of them.
enum MtaKind {
    MTA_KIND_F32_F32 = 0,
    MTA_KIND_F32_F16 = 1,
    MTA_KIND_F32_BF16 = 2,
    MTA_KIND_F64_F64 = 3,
    MTA_KIND_F64_F32 = 4,
    MTA_KIND_BF16_F32 = 5,
    MTA_KIND_BF16_F16 = 6,
    MTA_KIND_BF16_BF16 = 7,
};

enum MtaDtype {
    MTA_DTYPE_F32 = 0,
    MTA_DTYPE_F16 = 1,
    MTA_DTYPE_BF16 = 2,
    MTA_DTYPE_F64 = 3,
};

#if !defined(__CUDACC_RTC__)
static_assert(sizeof(MtaTensorTable<1>) <= 4000, "depth-1 table exceeds the kernel parameter limit");
static_assert(sizeof(MtaTensorTable<2>) <= 4000, "depth-2 table exceeds the kernel parameter limit");
static_assert(sizeof(MtaTensorTable<3>) <= 4000, "depth-3 table exceeds the kernel parameter limit");
static_assert(sizeof(MtaTensorTable<4>) <= 4000, "depth-4 table exceeds the kernel parameter limit");
static_assert(MtaTableCapacity<1>::tensors <= 255, "block_to_tensor is a byte");
#endif
