// Test helper: gzip and zstd bytes made with the real libraries (zlib's
// deflate with a gzip wrapper, libzstd's one-shot compressor), so the
// reader's tests decode what `gzip` and `zstd` write.
#ifndef PSDB_TESTS_TRAIN_COMPRESS_H_
#define PSDB_TESTS_TRAIN_COMPRESS_H_

#include <zlib.h>
#include <zstd.h>

#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace psdb::testing {

// One gzip member holding `data`.
inline std::string GzipMember(absl::string_view data) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  // 16 + MAX_WBITS: gzip wrapper; level 6 as gzip(1)'s default.
  EXPECT_EQ(
      deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
      Z_OK);
  std::string out(deflateBound(&zs, data.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// One zstd frame holding `data` (with its content checksum, as zstd(1)).
inline std::string ZstdFrame(absl::string_view data) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  std::string out(ZSTD_compressBound(data.size()), '\0');
  const size_t n =
      ZSTD_compress2(cctx, out.data(), out.size(), data.data(), data.size());
  ZSTD_freeCCtx(cctx);
  EXPECT_FALSE(ZSTD_isError(n)) << ZSTD_getErrorName(n);
  out.resize(n);
  return out;
}

inline void WriteBytes(const std::string& path, absl::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace psdb::testing

#endif  // PSDB_TESTS_TRAIN_COMPRESS_H_
