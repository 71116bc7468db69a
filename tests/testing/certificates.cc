#include "tests/testing/certificates.h"

#include "absl/strings/str_cat.h"
#include "tests/testing/child_process.h"

namespace psdb::testing {

absl::Status MakeTestCertificates(const std::string& dir) {
  const std::string script = absl::StrCat(
      "set -e; cd '", dir, "';",
      "for ca in ca1 ca2; do openssl req -x509 -newkey ec -pkeyopt "
      "ec_paramgen_curve:prime256v1 -nodes "
      "-keyout $ca.key -out $ca.pem -days 30 -subj /CN=$ca; done;",
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext;",
      "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
      "-keyout server.key -out server.csr "
      "-subj /CN=localhost;",
      "openssl x509 -req -in server.csr -CA ca1.pem -CAkey ca1.key "
      "-set_serial 11 -days 30 -extfile san.ext -out server.pem;",
      "openssl x509 -req -in server.csr -CA ca1.pem -CAkey ca1.key "
      "-set_serial 12 -days 10 -extfile san.ext -out soon.pem;",
      "for c in 1 2 3; do ca=ca$c; [ $c = 3 ] && ca=ca1; openssl req "
      "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
      "-keyout client$c.key -out client$c.csr -subj /CN=client$c; "
      "openssl x509 -req -in client$c.csr -CA $ca.pem -CAkey $ca.key "
      "-set_serial 2$c -days 30 -out client$c.pem; done;",
      // openssl x509 cannot backdate, nor revoke; `openssl ca` does both.
      "mkdir -p cadb; : > cadb/index.txt; echo 01 > cadb/serial;",
      "printf '[ca]\\ndefault_ca=c\\n[c]\\ndir=.\\ndatabase=cadb/index.txt\\n"
      "serial=cadb/serial\\nnew_certs_dir=cadb\\ndefault_md=sha256\\n"
      "policy=p\\ncopy_extensions=copy\\nunique_subject=no\\n"
      "default_crl_days=30\\n[p]\\ncommonName=supplied\\n' > ca.cnf;",
      "openssl ca -batch -config ca.cnf -cert ca1.pem -keyfile ca1.key "
      "-in server.csr -out expired.pem -notext "
      "-startdate 20200101000000Z -enddate 20200102000000Z;",
      "openssl ca -batch -config ca.cnf -cert ca1.pem -keyfile ca1.key "
      "-revoke client3.pem;",
      "openssl ca -batch -config ca.cnf -cert ca1.pem -keyfile ca1.key "
      "-gencrl -out crl.pem;",
      "openssl crl -in crl.pem -outform DER -out crl.der;",
      "openssl ca -batch -config ca.cnf -cert ca1.pem -keyfile ca1.key "
      "-gencrl -crl_lastupdate 20200101000000Z "
      "-crl_nextupdate 20200102000000Z -out expired_crl.pem;",
      "openssl ca -batch -config ca.cnf -cert ca2.pem -keyfile ca2.key "
      "-gencrl -out ca2_crl.pem");
  const ShellResult result = RunShell(script);
  if (result.exit_code != 0) {
    return absl::InternalError(
        absl::StrCat("making test certificates failed: ", result.output));
  }
  return absl::OkStatus();
}

}  // namespace psdb::testing
