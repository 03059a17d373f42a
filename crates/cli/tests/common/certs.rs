//! Certificates for the TLS tests, made with openssl as an operator would (or `ovs-pki`: a
//! common name and no subject alternative names): a CA, and keys with certificates it signs.

use super::*;

/// A CA: its key and self-signed certificate.
pub struct Ca {
    pub key: ScratchFile,
    pub cert: ScratchFile,
    tag: String,
}

/// A private key and a certificate signed by a [`Ca`].
pub struct Identity {
    pub key: ScratchFile,
    pub cert: ScratchFile,
}

impl Ca {
    pub fn new(tag: &str) -> Ca {
        let key = ScratchFile::new(&format!("{tag}-ca.key"));
        let cert = ScratchFile::new(&format!("{tag}-ca.crt"));
        let subject = format!("/CN=wirespeed test CA {tag}");
        must(&[
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            &subject, "-keyout", &key, "-out", &cert,
        ]);
        Ca {
            key,
            cert,
            tag: tag.to_string(),
        }
    }

    /// A key and a certificate for `name` (its common name), signed by this CA.
    pub fn issue(&self, name: &str) -> Identity {
        let key = ScratchFile::new(&format!("{}-{name}.key", self.tag));
        let request = ScratchFile::new(&format!("{}-{name}.csr", self.tag));
        let cert = ScratchFile::new(&format!("{}-{name}.crt", self.tag));
        let extensions = ScratchFile::new(&format!("{}-{name}.ext", self.tag));
        std::fs::write(&extensions, "basicConstraints=CA:FALSE\n").unwrap();
        let subject = format!("/CN={name}");
        must(&[
            "openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", &subject, "-keyout", &key,
            "-out", &request,
        ]);
        must(&[
            "openssl",
            "x509",
            "-req",
            "-in",
            &request,
            "-CA",
            &self.cert,
            "-CAkey",
            &self.key,
            "-set_serial",
            "2",
            "-days",
            "2",
            "-extfile",
            &extensions,
            "-out",
            &cert,
        ]);
        Identity { key, cert }
    }
}

impl Identity {
    /// `--private-key K --certificate C --ca-cert CA`, as ovs-ofctl and wirespeed take them.
    pub fn options(&self, ca: &Ca) -> Vec<String> {
        vec![
            format!("--private-key={}", &*self.key),
            format!("--certificate={}", &*self.cert),
            format!("--ca-cert={}", &*ca.cert),
        ]
    }
}
