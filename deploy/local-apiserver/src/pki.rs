//! The throwaway certificates of one server: a CA, the serving certificate and a client in
//! `system:masters`.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use crate::{LocalApiServerError, Result};

/// The certificates of one server: a CA, the server's serving certificate and one client.
#[derive(Debug)]
pub(crate) struct Pki {
    pub(crate) ca_pem: String,
    pub(crate) serving_cert_pem: String,
    pub(crate) serving_key_pem: String,
    pub(crate) client_cert_pem: String,
    pub(crate) client_key_pem: String,
}

impl Pki {
    /// Generates a new CA and the certificates it signs.
    pub(crate) fn generate() -> Result<Pki> {
        let failed = |what| move |source| LocalApiServerError::Certificate { what, source };

        let ca_key = KeyPair::generate().map_err(failed("ca"))?;
        let mut ca = CertificateParams::default();
        ca.distinguished_name = name("fleetscope-local-apiserver-ca", None);
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).map_err(failed("ca"))?;
        let issuer = Issuer::new(ca, &ca_key);

        let serving_key = KeyPair::generate().map_err(failed("serving"))?;
        let mut serving = CertificateParams::new(["127.0.0.1".to_owned(), "localhost".to_owned()])
            .map_err(failed("serving"))?;
        serving.distinguished_name = name("fleetscope-local-apiserver", None);
        serving.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        serving.use_authority_key_identifier_extension = true;
        let serving_cert = serving
            .signed_by(&serving_key, &issuer)
            .map_err(failed("serving"))?;

        // The API server takes the user from CN and the groups from O.
        let client_key = KeyPair::generate().map_err(failed("client"))?;
        let mut client = CertificateParams::default();
        client.distinguished_name = name("fleetscope-test-admin", Some("system:masters"));
        client.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        client.use_authority_key_identifier_extension = true;
        let client_cert = client
            .signed_by(&client_key, &issuer)
            .map_err(failed("client"))?;

        Ok(Pki {
            ca_pem: ca_cert.pem(),
            serving_cert_pem: serving_cert.pem(),
            serving_key_pem: serving_key.serialize_pem(),
            client_cert_pem: client_cert.pem(),
            client_key_pem: client_key.serialize_pem(),
        })
    }

    /// What the client presents and trusts.
    pub(crate) fn client_tls(&self) -> ClientTls {
        ClientTls {
            ca_pem: self.ca_pem.clone(),
            identity_pem: format!("{}{}", self.client_cert_pem, self.client_key_pem),
        }
    }
}

/// A distinguished name with a common name and, given one, an organization.
fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    if let Some(organization) = organization {
        name.push(DnType::OrganizationName, organization);
    }
    name
}

/// What a client presents and trusts: the CA and the client certificate with its key.
#[derive(Debug, Clone)]
pub(crate) struct ClientTls {
    pub(crate) ca_pem: String,
    pub(crate) identity_pem: String,
}

#[cfg(test)]
mod tests {
    use base64::engine::general_purpose::STANDARD as BASE64;
    use base64::Engine as _;

    use super::*;

    fn der(pem: &str) -> Vec<u8> {
        let body: String = pem
            .lines()
            .filter(|line| !line.starts_with("-----"))
            .collect();
        BASE64.decode(body).unwrap()
    }

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        haystack
            .windows(needle.len())
            .any(|window| window == needle)
    }

    #[test]
    fn certificates_are_v3_with_the_masters_group() {
        // The start of a tbsCertificate's explicit version field holding v3 (INTEGER 2).
        const VERSION_3: &[u8] = &[0xa0, 0x03, 0x02, 0x01, 0x02];
        // The OIDs of id-kp-clientAuth and id-kp-serverAuth, DER-encoded.
        const CLIENT_AUTH: &[u8] = &[0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02];
        const SERVER_AUTH: &[u8] = &[0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01];
        let pki = Pki::generate().unwrap();
        for pem in [&pki.ca_pem, &pki.serving_cert_pem, &pki.client_cert_pem] {
            assert!(contains(&der(pem)[..16], VERSION_3), "not v3: {pem}");
        }
        let client = der(&pki.client_cert_pem);
        assert!(contains(&client, b"system:masters"));
        assert!(contains(&client, CLIENT_AUTH));
        let serving = der(&pki.serving_cert_pem);
        assert!(contains(&serving, SERVER_AUTH));
        assert!(
            contains(&serving, &[127, 0, 0, 1]),
            "an IP address SAN for 127.0.0.1"
        );
        assert!(pki
            .client_key_pem
            .starts_with("-----BEGIN PRIVATE KEY-----"));
        // The TLS client that talks to the server accepts both.
        let tls = pki.client_tls();
        reqwest::Identity::from_pem(tls.identity_pem.as_bytes()).unwrap();
        reqwest::Certificate::from_pem(tls.ca_pem.as_bytes()).unwrap();
    }
}
