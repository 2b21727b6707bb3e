//! TLS for supervisor's HTTPS clients (GitHub, the npm registry): rustls on ring, trusting the
//! system's root certificates through rustls-platform-verifier — read when the first certificate is
//! verified, not when a client is made. Reading and parsing the roots takes milliseconds (Debian's
//! store is read twice over: the bundle, then each file of the directory), and a client that speaks
//! plain HTTP to this machine (the sandbox GitHub, a test server) never needs them. Every client of
//! the process shares the one reading.

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, Error, SignatureScheme};

/// A rustls client configuration that trusts the system's root certificates.
pub fn client_config() -> Result<rustls::ClientConfig, String> {
    let roots = system_roots();
    rustls::ClientConfig::builder_with_provider(Arc::clone(&roots.provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up failed: {e}"))
        .map(|b| {
            b.dangerous()
                .with_custom_certificate_verifier(roots)
                .with_no_client_auth()
        })
}

/// Read the system's roots now (when a client will speak TLS soon: done off the path of its first
/// request). Failing to read them is left for the handshake to report.
pub fn read_roots() {
    let _ = system_roots().verifier();
}

/// Whether the system's roots have been read in this process.
#[cfg(test)]
fn roots_read() -> bool {
    system_roots().verifier.get().is_some()
}

fn system_roots() -> Arc<SystemRoots> {
    static ROOTS: OnceLock<Arc<SystemRoots>> = OnceLock::new();
    Arc::clone(ROOTS.get_or_init(|| {
        Arc::new(SystemRoots {
            provider: Arc::new(rustls::crypto::ring::default_provider()),
            verifier: OnceLock::new(),
        })
    }))
}

/// The platform's verifier, made (the roots read) on first use.
#[derive(Debug)]
struct SystemRoots {
    provider: Arc<CryptoProvider>,
    verifier: OnceLock<Result<rustls_platform_verifier::Verifier, Error>>,
}

impl SystemRoots {
    fn verifier(&self) -> Result<&rustls_platform_verifier::Verifier, Error> {
        self.verifier
            .get_or_init(|| rustls_platform_verifier::Verifier::new(Arc::clone(&self.provider)))
            .as_ref()
            .map_err(|e| Error::General(format!("no system root certificates: {e}")))
    }
}

impl ServerCertVerifier for SystemRoots {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        self.verifier()?.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.verifier()?.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.verifier()?.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        // What the verifier would say, without reading the roots: the provider's schemes.
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use rustls::{CertificateError, ClientConnection, ServerConnection};

    use super::*;

    /// A self-signed server certificate for `tls-test.supervisor.invalid` (no system trusts it) and its
    /// key.
    const CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBzDCCAXKgAwIBAgIUcakTnKkFyL23kqEOQST5j0+VyXUwCgYIKoZIzj0EAwIw
JjEkMCIGA1UEAwwbdGxzLXRlc3Quc3VwZXJ2aXNvci5pbnZhbGlkMCAXDTI2MTEy
NjEyMzk0NVoYDzIxMjYxMTAyMTIzOTQ1WjAmMSQwIgYDVQQDDBt0bHMtdGVzdC5z
dXBlcnZpc29yLmludmFsaWQwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAATYcWXt
qbYJGro64Dinwn9wqSDLJ1uYV69l/a49Df/f2tqwhOKFJw82AJ2oJY110p8JiOgk
mxhikQ4keNFuMDw1o3wwejAMBgNVHRMBAf8EAjAAMA4GA1UdDwEB/wQEAwIHgDAT
BgNVHSUEDDAKBggrBgEFBQcDATAmBgNVHREEHzAdght0bHMtdGVzdC5zdXBlcnZp
c29yLmludmFsaWQwHQYDVR0OBBYEFKlsd5eHkDxoAlBTH8gJomJPb/QbMAoGCCqG
SM49BAMCA0gAMEUCICYYWD9979uiM4TpBZqpT1n4qiGiNgPRRv2JcOHZJksZAiEA
wLF9w4fyaQK7epDq9r60jPNoOd3zX8oc7HdQXzSo0D4=
-----END CERTIFICATE-----
";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgaSKWBuwHKvnSlwsM
p32fB2gnBz/nFA+kUmfwnOQeSPShRANCAATYcWXtqbYJGro64Dinwn9wqSDLJ1uY
V69l/a49Df/f2tqwhOKFJw82AJ2oJY110p8JiOgkmxhikQ4keNFuMDw1
-----END PRIVATE KEY-----
";

    /// Run a handshake between `client` and a server showing [`CERT`], in memory.
    fn handshake(client: rustls::ClientConfig) -> Result<(), Error> {
        let server = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(CERT.as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(KEY.as_bytes()).unwrap(),
        )?;
        let name = ServerName::try_from("tls-test.supervisor.invalid").unwrap();
        let mut c = ClientConnection::new(Arc::new(client), name)?;
        let mut s = ServerConnection::new(Arc::new(server))?;
        let mut wire = Vec::new();
        for _ in 0..10 {
            wire.clear();
            c.write_tls(&mut wire).unwrap();
            s.read_tls(&mut wire.as_slice()).unwrap();
            s.process_new_packets()?;
            wire.clear();
            s.write_tls(&mut wire).unwrap();
            c.read_tls(&mut wire.as_slice()).unwrap();
            c.process_new_packets()?;
            if !c.is_handshaking() {
                return Ok(());
            }
        }
        Err(Error::General("the handshake did not finish".into()))
    }

    #[test]
    fn the_system_roots_are_read_at_the_first_handshake_and_checked() {
        // The only test of the library that makes a TLS connection.
        let config = client_config().unwrap();
        assert!(!roots_read(), "a client is made without reading the roots");
        let err = handshake(config).unwrap_err();
        assert_eq!(
            err,
            Error::InvalidCertificate(CertificateError::UnknownIssuer),
            "a certificate no root vouches for is refused"
        );
        assert!(roots_read());
    }
}
