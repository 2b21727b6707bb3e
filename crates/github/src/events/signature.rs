//! `X-Hub-Signature-256`: the HMAC-SHA256 of a delivery's raw body under the webhook's secret,
//! sent as `sha256=<64 hex digits>`. Checked before a byte of the body is parsed; computed as the
//! body arrives ([`Verifier`]), so no reader has to hold a body whole just to hash it.

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The header GitHub signs deliveries with (HMAC-SHA256).
pub const SIGNATURE_HEADER: &str = "x-hub-signature-256";
/// The legacy SHA-1 header. Never accepted on its own.
pub const LEGACY_SIGNATURE_HEADER: &str = "x-hub-signature";
/// Shortest secret accepted: a guessable secret lets anyone forge deliveries.
pub const MIN_SECRET_BYTES: usize = 16;

const DIGEST_BYTES: usize = 32;

/// The shared secret of a webhook. Its `Debug` shows only its length; it is never logged.
#[derive(Clone)]
pub struct WebhookSecret(Vec<u8>);

impl WebhookSecret {
    /// A secret of at least [`MIN_SECRET_BYTES`] bytes.
    pub fn new(secret: impl Into<Vec<u8>>) -> Result<WebhookSecret, SecretError> {
        let secret = secret.into();
        if secret.len() < MIN_SECRET_BYTES {
            return Err(SecretError::TooShort { len: secret.len() });
        }
        Ok(WebhookSecret(secret))
    }

    /// The `X-Hub-Signature-256` value GitHub sends with `body`: `sha256=<hex>`.
    pub fn sign(&self, body: &[u8]) -> String {
        let mut mac = self.mac();
        mac.update(body);
        let digest = mac.finalize().into_bytes();
        let mut out = String::with_capacity(7 + 2 * DIGEST_BYTES);
        out.push_str("sha256=");
        for byte in digest {
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
        out
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes keys of any length (long ones are hashed first): this cannot fail.
        <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of every length"))
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WebhookSecret(<{} bytes>)", self.0.len())
    }
}

impl Drop for WebhookSecret {
    fn drop(&mut self) {
        // Best effort: do not leave the secret in freed memory.
        self.0.iter_mut().for_each(|b| *b = 0);
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// A secret that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error(
        "the webhook secret is {len} bytes long; use at least {MIN_SECRET_BYTES} random bytes (e.g. the output of `openssl rand -hex 32`) in both GitHub's webhook settings and supervisor"
    )]
    TooShort { len: usize },
}

/// Why a delivery's signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("no X-Hub-Signature-256 header: set a secret on the webhook in GitHub")]
    Missing,
    #[error(
        "only the SHA-1 X-Hub-Signature header was sent; SHA-1 signatures are not accepted (X-Hub-Signature-256 is required)"
    )]
    Sha1Only,
    #[error("X-Hub-Signature-256 {0}")]
    Malformed(&'static str),
    #[error(
        "X-Hub-Signature-256 does not match the body: the secrets of GitHub and supervisor differ"
    )]
    Mismatch,
}

/// The digest a delivery claims, read from its headers.
#[derive(Clone, PartialEq, Eq)]
pub struct Signature([u8; DIGEST_BYTES]);

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Signature(..)")
    }
}

impl Signature {
    /// Read the claimed digest from the values of `X-Hub-Signature-256` and `X-Hub-Signature`
    /// (the latter only to say why a delivery carrying nothing else is refused).
    pub fn from_headers(
        sha256: Option<&[u8]>,
        sha1: Option<&[u8]>,
    ) -> Result<Signature, SignatureError> {
        let Some(value) = sha256 else {
            return Err(match sha1 {
                Some(_) => SignatureError::Sha1Only,
                None => SignatureError::Missing,
            });
        };
        let value = value.trim_ascii();
        let hex = match value.split_at_checked(7) {
            Some((scheme, hex)) if scheme.eq_ignore_ascii_case(b"sha256=") => hex,
            _ => return Err(SignatureError::Malformed("does not start with `sha256=`")),
        };
        if hex.len() != 2 * DIGEST_BYTES {
            return Err(SignatureError::Malformed(
                "is not `sha256=` followed by 64 hexadecimal digits",
            ));
        }
        let mut digest = [0u8; DIGEST_BYTES];
        for (byte, pair) in digest.iter_mut().zip(hex.chunks_exact(2)) {
            match (hex_value(pair[0]), hex_value(pair[1])) {
                (Some(high), Some(low)) => *byte = high << 4 | low,
                _ => {
                    return Err(SignatureError::Malformed(
                        "has a character that is not a hexadecimal digit",
                    ));
                }
            }
        }
        Ok(Signature(digest))
    }

    /// Whether `body` is what was signed with `secret`, compared in constant time.
    pub(crate) fn verify(&self, secret: &WebhookSecret, body: &[u8]) -> Result<(), SignatureError> {
        let mut verifier = self.verifier(secret);
        verifier.update(body);
        verifier.finish()
    }

    /// A check of this signature against a body fed to it piece by piece.
    pub fn verifier(&self, secret: &WebhookSecret) -> Verifier {
        Verifier {
            mac: secret.mac(),
            claimed: self.0,
        }
    }
}

/// The HMAC of a body being received, to compare with the signature its headers claim once the
/// body is complete. It holds the hash state, never the body.
pub struct Verifier {
    mac: Hmac<Sha256>,
    claimed: [u8; DIGEST_BYTES],
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Verifier(..)")
    }
}

impl Verifier {
    /// Hash the next piece of the body.
    pub fn update(&mut self, piece: &[u8]) {
        self.mac.update(piece);
    }

    /// Whether the pieces fed so far, in order, are what was signed; compared in constant time.
    pub fn finish(self) -> Result<(), SignatureError> {
        self.mac
            .verify_slice(&self.claimed)
            .map_err(|_| SignatureError::Mismatch)
    }
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Check a delivery: its headers' claimed digest against the HMAC of its body.
pub fn verify_signature(
    secret: &WebhookSecret,
    sha256: Option<&[u8]>,
    sha1: Option<&[u8]>,
    body: &[u8],
) -> Result<(), SignatureError> {
    Signature::from_headers(sha256, sha1)?.verify(secret, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The worked example of GitHub's "Validating webhook deliveries" documentation: its secret,
    /// payload and signature.
    const DOCUMENTED: (&str, &[u8], &[u8]) = (
        "It's a Secret to Everybody",
        b"Hello, World!",
        b"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
    );

    fn secret() -> WebhookSecret {
        WebhookSecret::new(DOCUMENTED.0).unwrap()
    }

    #[test]
    fn github_documented_example_verifies() {
        let (_, payload, header) = DOCUMENTED;
        assert_eq!(
            verify_signature(&secret(), Some(header), None, b"Hello, World!"),
            Ok(())
        );
        assert_eq!(secret().sign(b"Hello, World!").as_bytes(), header);
        let upper = header.to_ascii_uppercase();
        assert_eq!(
            verify_signature(&secret(), Some(&upper), None, payload),
            Ok(()),
            "hex digits and the scheme are read in either case"
        );
    }

    #[test]
    fn a_changed_body_or_secret_is_a_mismatch() {
        let header = secret().sign(b"{\"zen\":\"hi\"}");
        assert_eq!(
            verify_signature(
                &secret(),
                Some(header.as_bytes()),
                None,
                b"{\"zen\":\"hi!\"}"
            ),
            Err(SignatureError::Mismatch)
        );
        let other = WebhookSecret::new("another secret of 16+").unwrap();
        assert_eq!(
            verify_signature(&other, Some(header.as_bytes()), None, b"{\"zen\":\"hi\"}"),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn missing_sha1_only_and_malformed_headers_are_refused() {
        let body = b"{}";
        assert_eq!(
            verify_signature(&secret(), None, None, body),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            verify_signature(
                &secret(),
                None,
                Some(b"sha1=0123456789abcdef0123456789abcdef01234567"),
                body
            ),
            Err(SignatureError::Sha1Only)
        );
        let good = secret().sign(body);
        for bad in [
            "".to_string(),
            "sha256=".to_string(),
            good.replace("sha256=", "sha1="),
            good.replace("sha256=", ""),
            format!("{good}0"),
            good[..good.len() - 1].to_string(),
            good.replace(&good[10..11], "g"),
            format!("sha512={}", &good[7..]),
        ] {
            assert!(
                matches!(
                    verify_signature(&secret(), Some(bad.as_bytes()), None, body),
                    Err(SignatureError::Malformed(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn short_secrets_are_a_configuration_error() {
        assert_eq!(
            WebhookSecret::new("fifteen bytes!!").unwrap_err(),
            SecretError::TooShort { len: 15 }
        );
        assert!(WebhookSecret::new("sixteen bytes!!!").is_ok());
        let message = WebhookSecret::new("").unwrap_err().to_string();
        assert!(message.contains("at least 16"), "{message}");
    }

    #[test]
    fn the_secret_never_shows_in_debug_output() {
        let shown = format!("{:?}", secret());
        assert!(!shown.contains("Secret to"), "{shown}");
        assert!(shown.contains("26 bytes"), "{shown}");
    }

    /// `body` fed to a verifier of `header` in the pieces that `cuts` (offsets, any order) make.
    fn verify_in_pieces(header: &[u8], body: &[u8], cuts: &[usize]) -> Result<(), SignatureError> {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
        cuts.extend([0, body.len()]);
        cuts.sort_unstable();
        let mut verifier = Signature::from_headers(Some(header), None)?.verifier(&secret());
        for piece in cuts.windows(2) {
            verifier.update(&body[piece[0]..piece[1]]);
        }
        verifier.finish()
    }

    #[test]
    fn a_body_in_pieces_verifies_as_in_one() {
        let (_, payload, header) = DOCUMENTED;
        assert_eq!(verify_in_pieces(header, payload, &[]), Ok(()));
        assert_eq!(verify_in_pieces(header, payload, &[1, 5, 5, 12]), Ok(()));
        let every_byte: Vec<usize> = (0..payload.len()).collect();
        assert_eq!(verify_in_pieces(header, payload, &every_byte), Ok(()));
        // The same pieces in another order are another body.
        let mut swapped = payload.to_vec();
        swapped.rotate_left(5);
        assert_eq!(
            verify_in_pieces(header, &swapped, &[5]),
            Err(SignatureError::Mismatch)
        );
        // A piece left out, or one too many.
        assert_eq!(
            verify_in_pieces(header, &payload[..12], &[6]),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_in_pieces(header, b"Hello, World!!", &[13]),
            Err(SignatureError::Mismatch)
        );
    }

    proptest! {
        #[test]
        fn pieces_verify_exactly_when_the_whole_does(
            body in proptest::collection::vec(any::<u8>(), 0..2048),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
            signed_other in any::<bool>(),
        ) {
            let signed = if signed_other { [body.as_slice(), b"x"].concat() } else { body.clone() };
            let header = secret().sign(&signed);
            let whole = verify_signature(&secret(), Some(header.as_bytes()), None, &body);
            prop_assert_eq!(verify_in_pieces(header.as_bytes(), &body, &cuts), whole.clone());
            prop_assert_eq!(whole.is_ok(), !signed_other);
        }

        #[test]
        fn no_header_or_body_panics(
            sha256 in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..100)),
            sha1 in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..50)),
            body in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let verdict = verify_signature(&secret(), sha256.as_deref(), sha1.as_deref(), &body);
            // Arbitrary bytes are (overwhelmingly) not a valid signature of arbitrary bytes.
            prop_assert!(verdict.is_err());
        }

        #[test]
        fn well_formed_hex_of_the_wrong_digest_is_a_mismatch(
            digest in proptest::collection::vec(any::<u8>(), 32),
            body in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let header: String = std::iter::once("sha256=".to_string())
                .chain(digest.iter().map(|b| format!("{b:02x}")))
                .collect();
            prop_assume!(header != secret().sign(&body));
            prop_assert_eq!(
                verify_signature(&secret(), Some(header.as_bytes()), None, &body),
                Err(SignatureError::Mismatch)
            );
        }

        #[test]
        fn what_is_signed_verifies(body in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let header = secret().sign(&body);
            prop_assert_eq!(verify_signature(&secret(), Some(header.as_bytes()), None, &body), Ok(()));
        }
    }
}
