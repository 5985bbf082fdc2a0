//! TLS for the connections: rustls with one crypto provider (aws-lc-rs) and
//! the system's root certificates, or the PEM file `sslrootcert` names
//! (feature `tls`, on by default). Without the feature, `sslmode=require`
//! is refused at connect.

use mcp_tasks::store::StoreError;

use crate::config::Target;

/// What the pool and the feed connect with.
#[cfg(feature = "tls")]
pub(crate) type Tls = tokio_postgres_rustls::MakeRustlsConnect;

/// What the pool and the feed connect with.
#[cfg(not(feature = "tls"))]
pub(crate) type Tls = tokio_postgres::NoTls;

/// The connector for `target`.
#[cfg(feature = "tls")]
pub(crate) fn connector(target: &Target) -> Result<Tls, StoreError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    if target.config.get_ssl_mode() == tokio_postgres::config::SslMode::Disable {
        // Never used: an empty root store costs nothing to make.
        return client_config(rustls::RootCertStore::empty()).map(Tls::new);
    }
    let mut roots = rustls::RootCertStore::empty();
    match &target.root_cert {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|error| {
                    StoreError::new(
                        format!(
                            "cannot read the certificates of sslrootcert={}",
                            path.display()
                        ),
                        error,
                    )
                })?;
            for cert in certs {
                roots.add(cert).map_err(|error| {
                    StoreError::new("a certificate of sslrootcert is not usable", error)
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let _ = roots.add_parsable_certificates(found.certs);
        }
    }
    let config = client_config(roots)?;
    Ok(Tls::new(config))
}

#[cfg(feature = "tls")]
fn client_config(roots: rustls::RootCertStore) -> Result<rustls::ClientConfig, StoreError> {
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| StoreError::new("cannot set TLS up", error))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// The connector for `target`.
#[cfg(not(feature = "tls"))]
pub(crate) fn connector(target: &Target) -> Result<Tls, StoreError> {
    if target.config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
        return Err(StoreError::msg(
            "sslmode=require needs TLS, and this build of mcp-tasks-postgres has none \
             (its feature `tls`)",
        ));
    }
    Ok(tokio_postgres::NoTls)
}
