//! The caller a verified client certificate names (`auth.mtls.identity`).
//!
//! The TLS handshake has already verified the certificate against `server.tls.client_ca`; this
//! only reads the name the configuration asks for out of the end-entity certificate.

use x509_parser::asn1_rs::Tag;
use x509_parser::extensions::GeneralName;

use crate::auth::{Caller, Kind};
use crate::config::MtlsIdentity;

/// The `GeneralName` tags of a dNSName and of a uniformResourceIdentifier (RFC 5280 § 4.2.1.6).
const TAG_DNS: Tag = Tag(2);
const TAG_URI: Tag = Tag(6);

/// The caller's name in the end-entity certificate `cert_der` (DER) under `which`: the first
/// URI subject alternative name, the first DNS one, or the subject's (first) common name.
///
/// `None` when `which` is `Off`, when the certificate does not parse (or has bytes after it),
/// when it has no such name, or when that name is empty, not text, or holds control
/// characters. The first name of the kind decides: an unreadable one is not skipped for a
/// later one.
pub(crate) fn identity(cert_der: &[u8], which: MtlsIdentity) -> Option<String> {
    if which == MtlsIdentity::Off {
        return None;
    }
    let (rest, cert) = x509_parser::parse_x509_certificate(cert_der).ok()?;
    if !rest.is_empty() {
        return None;
    }
    let name = match which {
        MtlsIdentity::Off => return None,
        MtlsIdentity::SanUri | MtlsIdentity::SanDns => {
            let san = cert.subject_alternative_name().ok()??;
            let (tag, uri) = match which {
                MtlsIdentity::SanUri => (TAG_URI, true),
                _ => (TAG_DNS, false),
            };
            san.value.general_names.iter().find_map(|g| match g {
                GeneralName::URI(n) if uri => Some(Some(*n)),
                GeneralName::DNSName(n) if !uri => Some(Some(*n)),
                GeneralName::Invalid(t, _) if *t == tag => Some(None),
                _ => None,
            })??
        }
        MtlsIdentity::SubjectCn => cert.subject().iter_common_name().next()?.as_str().ok()?,
    };
    (!name.is_empty() && !name.chars().any(char::is_control)).then(|| name.to_owned())
}

/// The caller named by `cert_der` under `which` ([`identity`]), of kind `Mtls` with no scopes.
pub(crate) fn caller(cert_der: &[u8], which: MtlsIdentity) -> Option<Caller> {
    identity(cert_der, which).map(|id| Caller::new(Kind::Mtls, &id, []))
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};

    use super::*;

    /// A self-signed certificate with these SANs and, when given, this subject CN only.
    fn cert(sans: Vec<SanType>, cn: Option<&str>) -> Vec<u8> {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = sans;
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Example Org");
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    fn uri(s: &str) -> SanType {
        SanType::URI(s.try_into().unwrap())
    }

    fn dns(s: &str) -> SanType {
        SanType::DnsName(s.try_into().unwrap())
    }

    fn full() -> Vec<u8> {
        cert(
            vec![
                dns("billing.internal"),
                uri("spiffe://example.org/ns/prod/sa/billing"),
                dns("billing-2.internal"),
                uri("spiffe://example.org/other"),
            ],
            Some("billing-service"),
        )
    }

    #[test]
    fn each_identity_kind() {
        let der = full();
        assert_eq!(
            identity(&der, MtlsIdentity::SanUri).as_deref(),
            Some("spiffe://example.org/ns/prod/sa/billing")
        );
        assert_eq!(
            identity(&der, MtlsIdentity::SanDns).as_deref(),
            Some("billing.internal")
        );
        assert_eq!(
            identity(&der, MtlsIdentity::SubjectCn).as_deref(),
            Some("billing-service")
        );
        assert_eq!(identity(&der, MtlsIdentity::Off), None);
    }

    #[test]
    fn caller_is_mtls_without_scopes() {
        let der = full();
        assert_eq!(
            caller(&der, MtlsIdentity::SanDns),
            Some(Caller::new(Kind::Mtls, "billing.internal", []))
        );
        let c = caller(&der, MtlsIdentity::SubjectCn).unwrap();
        assert_eq!(c.kind, Kind::Mtls);
        assert!(c.scopes.is_empty());
        assert_eq!(caller(&der, MtlsIdentity::Off), None);
    }

    #[test]
    fn missing_name_is_none() {
        let dns_only = cert(vec![dns("a.internal")], None);
        assert_eq!(identity(&dns_only, MtlsIdentity::SanUri), None);
        assert_eq!(identity(&dns_only, MtlsIdentity::SubjectCn), None);
        assert_eq!(
            identity(&dns_only, MtlsIdentity::SanDns).as_deref(),
            Some("a.internal")
        );
        let uri_only = cert(vec![uri("spiffe://example.org/a")], None);
        assert_eq!(identity(&uri_only, MtlsIdentity::SanDns), None);
        let cn_only = cert(vec![], Some("only-cn"));
        assert_eq!(identity(&cn_only, MtlsIdentity::SanUri), None);
        assert_eq!(identity(&cn_only, MtlsIdentity::SanDns), None);
        assert_eq!(
            identity(&cn_only, MtlsIdentity::SubjectCn).as_deref(),
            Some("only-cn")
        );
        assert_eq!(caller(&cn_only, MtlsIdentity::SanUri), None);
        let nothing = cert(vec![], None);
        for which in [
            MtlsIdentity::SanUri,
            MtlsIdentity::SanDns,
            MtlsIdentity::SubjectCn,
        ] {
            assert_eq!(identity(&nothing, which), None);
        }
    }

    #[test]
    fn unusable_names_are_none() {
        let empty_cn = cert(vec![], Some(""));
        assert_eq!(identity(&empty_cn, MtlsIdentity::SubjectCn), None);
        let control = cert(vec![], Some("evil\r\nx-caller-id: admin"));
        assert_eq!(identity(&control, MtlsIdentity::SubjectCn), None);
    }

    #[test]
    fn garbage_is_none() {
        let der = full();
        for which in [
            MtlsIdentity::SanUri,
            MtlsIdentity::SanDns,
            MtlsIdentity::SubjectCn,
        ] {
            assert_eq!(identity(b"", which), None);
            assert_eq!(identity(b"not a certificate at all", which), None);
            assert_eq!(identity(&[0x30, 0x82, 0xff, 0xff, 0x01], which), None);
            assert_eq!(identity(&der[..der.len() - 1], which), None);
            let mut trailing = der.clone();
            trailing.push(0);
            assert_eq!(identity(&trailing, which), None);
            assert_eq!(caller(b"\x00\x01\x02", which), None);
        }
    }
}
