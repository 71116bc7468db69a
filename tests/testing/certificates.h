// Test certificates made at test time by the openssl command, for the TLS
// tests of every module: two CAs, a server certificate, clients, one
// client revoked, and certificate revocation lists (CRLs).
//
// Thread-safety: runs a shell command; call from one thread.
#ifndef PSDB_TESTS_TESTING_CERTIFICATES_H_
#define PSDB_TESTS_TESTING_CERTIFICATES_H_

#include <string>

#include "absl/status/status.h"

namespace psdb::testing {

// Writes, under dir (all EC P-256, 30 days unless said):
//   ca1.{pem,key}, ca2.{pem,key}       self-signed CAs
//   server.{pem,key}                   CA1, SAN 127.0.0.1/localhost
//   soon.pem                           server.key's, CA1, 10 days
//   expired.pem                        server.key's, CA1, Jan 1-2 2020
//   client1.{pem,key}                  CA1, serial 21
//   client2.{pem,key}                  CA2, serial 22
//   client3.{pem,key}                  CA1, serial 23, revoked in crl.pem
//   crl.pem, crl.der                   CA1's CRL listing serial 23
//                                      (next update in 30 days)
//   expired_crl.pem                    CA1's CRL of Jan 1-2 2020
//   ca2_crl.pem                        CA2's CRL
// Internal on failure, with openssl's output.
absl::Status MakeTestCertificates(const std::string& dir);

}  // namespace psdb::testing

#endif  // PSDB_TESTS_TESTING_CERTIFICATES_H_
