// epoch_summary_size: builds a closed epoch's membership summary from a relation, as the close does
// (storage/epochs/summary_build.h), and prints one JSON line: the keys read, the summary's bytes (per key), its
// estimated false-positive rate and the build's wall time (the COPY and the filling). For bench/layout/
// bytes_per_key.sh's closed-epoch figure. Manual; never registered with CTest.
//   epoch_summary_size <libpq URL> <relation>
#include <chrono>
#include <cstdio>
#include <exception>

#include "storage/epochs/summary_build.h"
#include "storage/pg/libpq_handles.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: epoch_summary_size <libpq URL> <relation>\n");
    return 2;
  }
  try {
    scangate::storage::PgConnPtr conn(PQconnectdb(argv[1]));
    if (!conn || PQstatus(conn.get()) != CONNECTION_OK) {
      std::fprintf(stderr, "epoch_summary_size: %s", conn ? PQerrorMessage(conn.get()) : "out of memory\n");
      return 1;
    }
    const auto start = std::chrono::steady_clock::now();
    const scangate::EpochSummary s = scangate::storage::BuildEpochSummary(conn.get(), argv[2]);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const double keys = static_cast<double>(s.keys());
    std::printf("{\"relation\":\"%s\",\"keys\":%llu,\"summary_bytes\":%llu,\"bytes_per_key\":%.3f,"
                "\"estimated_fp\":%.6f,\"build_ms\":%.1f}\n",
                argv[2], static_cast<unsigned long long>(s.keys()), static_cast<unsigned long long>(s.bytes()),
                keys > 0 ? static_cast<double>(s.bytes()) / keys : 0.0, s.EstimatedFpRate(), ms);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "epoch_summary_size: %s\n", e.what());
    return 1;
  }
}
