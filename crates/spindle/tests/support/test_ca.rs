//! Test support (TLS tests of spindle-http and spindle-grpc, which include it by `#[path]`): a
//! certificate authority made at run time with rcgen, and the leaf certificates it signs.
#![allow(dead_code)]

/// A certificate authority and what it signs.
pub struct Ca {
    pub cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    /// The authority's certificate, PEM.
    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A leaf certificate for `names`, signed by this authority: (certificate PEM, key PEM).
    pub fn issue(&self, names: &[&str]) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let params = rcgen::CertificateParams::new(names).unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}
