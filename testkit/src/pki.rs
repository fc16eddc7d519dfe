//! A private certificate authority made in a test, for the services' TLS.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// A server's certificate and key, and the CA that signed it, as PEM.
#[derive(Debug, Clone)]
pub struct PrivatePki {
    pub ca: String,
    pub cert: String,
    pub key: String,
}

/// A new CA named `name` and a server certificate it signed for `127.0.0.1` and `localhost`.
pub fn private_pki(name: &str) -> PrivatePki {
    let ca_key = KeyPair::generate().expect("a CA key");
    let mut ca = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, format!("{name} test ca"));
    ca.distinguished_name = dn;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key).expect("a self-signed CA");
    let issuer = Issuer::new(ca, &ca_key);
    let key = KeyPair::generate().expect("a server key");
    let mut server = CertificateParams::new(["127.0.0.1".to_owned(), "localhost".to_owned()])
        .expect("server names");
    server.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    server.use_authority_key_identifier_extension = true;
    let cert = server
        .signed_by(&key, &issuer)
        .expect("a certificate the CA signed");
    PrivatePki {
        ca: ca_cert.pem(),
        cert: cert.pem(),
        key: key.serialize_pem(),
    }
}
