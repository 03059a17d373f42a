//! A tunnel port's options as `--port N=vxlan:remote_ip=IP,...` writes them (Open vSwitch's
//! `options:` of an interface of type vxlan, geneve or gre).

use core::fmt;
use core::str::FromStr;
use std::net::Ipv4Addr;

use crate::tunnel::header::{GENEVE_PORT, VXLAN_PORT};

/// The largest VNI: VXLAN and Geneve carry 24 bits.
pub const MAX_VNI: u32 = (1 << 24) - 1;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum TunnelKind {
    Vxlan,
    Geneve,
    /// Ethernet over GRE (RFC 2784 and 2890's key; the kernel's gretap, Open vSwitch's
    /// gre): IP protocol 47, no UDP.
    Gre,
}

impl TunnelKind {
    pub fn name(self) -> &'static str {
        match self {
            TunnelKind::Vxlan => "vxlan",
            TunnelKind::Geneve => "geneve",
            TunnelKind::Gre => "gre",
        }
    }

    /// The IANA UDP port of the encapsulation; 0 for GRE, which UDP does not carry.
    pub fn default_port(self) -> u16 {
        match self {
            TunnelKind::Vxlan => VXLAN_PORT,
            TunnelKind::Geneve => GENEVE_PORT,
            TunnelKind::Gre => 0,
        }
    }

    /// The largest key: a 24-bit VNI, or GRE's 32-bit key.
    pub fn max_key(self) -> u32 {
        match self {
            TunnelKind::Vxlan | TunnelKind::Geneve => MAX_VNI,
            TunnelKind::Gre => u32::MAX,
        }
    }
}

/// The key (VXLAN's and Geneve's VNI, GRE's key) a tunnel port sends and takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TunnelKey {
    /// This key only: packets of another are not the port's.
    Fixed(u32),
    /// Any key: received packets carry theirs as `tun_id`; sent ones take the flow's
    /// `tun_id` (`set_field:N->tun_id`).
    Flow,
    /// GRE without a key (no `key=` given): none is sent, and packets without one (or with
    /// key 0, as in Open vSwitch) are the port's, with `tun_id` 0.
    Absent,
}

/// The far end a tunnel port sends to and takes packets from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Remote {
    /// This address only.
    Ip(Ipv4Addr),
    /// Any (`remote_ip=flow`): received packets carry theirs as `tun_src`; sent ones go to
    /// the flow's `tun_dst` (`set_field:IP->tun_dst`). A port with the far end's address
    /// takes that far end's packets first, as in Open vSwitch.
    Flow,
}

impl fmt::Display for Remote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Remote::Ip(ip) => write!(f, "{ip}"),
            Remote::Flow => f.write_str("flow"),
        }
    }
}

/// A tunnel port's options.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct TunnelConfig {
    pub kind: TunnelKind,
    pub remote_ip: Remote,
    /// The underlay address packets leave from; by default the address of the interface
    /// the route to `remote_ip` goes through.
    pub local_ip: Option<Ipv4Addr>,
    pub key: TunnelKey,
    pub dst_port: u16,
    /// Set DF in the outer IPv4 header (Open vSwitch's `df_default`, on by default).
    pub df: bool,
    /// Compute the outer UDP checksum (Open vSwitch's `csum`, off by default: zero is valid
    /// over IPv4 and costs nothing per byte).
    pub csum: bool,
    pub ttl: u8,
}

/// Why a tunnel port's options were refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TunnelConfigError {
    #[error("a {0} port needs remote_ip=IP (the far end of the tunnel) or remote_ip=flow")]
    NoRemote(&'static str),
    #[error("key={0}: a VNI is at most {MAX_VNI} (24 bits), or key=flow")]
    BadKey(String),
    #[error("key={0}: a GRE key is at most 4294967295 (32 bits), or key=flow")]
    BadGreKey(String),
    #[error("{option}={value}: {why}")]
    BadValue {
        option: String,
        value: String,
        why: &'static str,
    },
    #[error("unknown option '{0}' (remote_ip, local_ip, key, dst_port, df_default, csum, ttl)")]
    UnknownOption(String),
    #[error("{0} is given twice")]
    Twice(String),
    #[error(
        "in_key={in_key}, out_key={out_key}: a tunnel port here has one key both ways; give \
         key= (in_key and out_key only together and equal)"
    )]
    SplitKey { in_key: String, out_key: String },
    #[error("key= with in_key or out_key: give key= alone (it is both)")]
    KeyAndSplitKey,
    #[error("remote_ip={0} is local_ip: a tunnel's far end is another host")]
    RemoteIsLocal(Ipv4Addr),
    #[error("'{0}' is not a tunnel (vxlan:OPTIONS, geneve:OPTIONS or gre:OPTIONS)")]
    NotATunnel(String),
}

impl TunnelConfig {
    /// Whether `spec` names a tunnel port (`vxlan:`, `geneve:` or `gre:`).
    pub fn is_tunnel(spec: &str) -> bool {
        ["vxlan:", "geneve:", "gre:"]
            .iter()
            .any(|kind| spec.starts_with(kind))
    }

    /// The key (VNI) sent for a packet whose flow has `tun_id`.
    #[inline]
    pub fn vni(&self, tun_id: u64) -> u32 {
        match self.key {
            TunnelKey::Fixed(vni) => vni,
            TunnelKey::Flow => (tun_id as u32) & self.kind.max_key(),
            TunnelKey::Absent => 0,
        }
    }

    /// Whether a received packet of key (VNI) `vni` belongs to this port.
    #[inline]
    pub fn takes_vni(&self, vni: u32) -> bool {
        match self.key {
            TunnelKey::Fixed(key) => key == vni,
            TunnelKey::Flow => true,
            TunnelKey::Absent => vni == 0,
        }
    }
}

impl FromStr for TunnelConfig {
    type Err = TunnelConfigError;

    fn from_str(spec: &str) -> Result<TunnelConfig, TunnelConfigError> {
        let (kind, options) = match spec.split_once(':') {
            Some(("vxlan", options)) => (TunnelKind::Vxlan, options),
            Some(("geneve", options)) => (TunnelKind::Geneve, options),
            Some(("gre", options)) => (TunnelKind::Gre, options),
            _ => return Err(TunnelConfigError::NotATunnel(spec.to_string())),
        };
        let bad = |option: &str, value: &str, why| TunnelConfigError::BadValue {
            option: option.to_string(),
            value: value.to_string(),
            why,
        };
        let mut remote_ip = None;
        let mut config = TunnelConfig {
            kind,
            remote_ip: Remote::Flow,
            local_ip: None,
            key: match kind {
                TunnelKind::Gre => TunnelKey::Absent,
                TunnelKind::Vxlan | TunnelKind::Geneve => TunnelKey::Fixed(0),
            },
            dst_port: kind.default_port(),
            df: true,
            csum: false,
            ttl: 64,
        };
        let flag = |option: &str, value: &str| match value {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(bad(option, value, "true or false")),
        };
        let mut seen: Vec<&str> = Vec::new();
        // Open vSwitch's in_key and out_key (as written, and as read), taken as key= when
        // they are equal.
        let mut in_key: Option<(&str, TunnelKey)> = None;
        let mut out_key: Option<(&str, TunnelKey)> = None;
        for option in options.split(',').filter(|o| !o.is_empty()) {
            let (name, value) = option
                .split_once('=')
                .ok_or_else(|| bad(option, "", "options are NAME=VALUE"))?;
            if seen.contains(&name) {
                return Err(TunnelConfigError::Twice(name.to_string()));
            }
            seen.push(name);
            let given = name;
            let name = match name {
                "in_key" | "out_key" => "key",
                _ => name,
            };
            match name {
                "remote_ip" if value == "flow" => remote_ip = Some(Remote::Flow),
                "remote_ip" => {
                    let ip: Ipv4Addr = value
                        .parse()
                        .map_err(|_| bad(name, value, "an IPv4 address"))?;
                    if ip.is_unspecified() || ip.is_multicast() || ip.is_broadcast() {
                        return Err(bad(name, value, "a unicast IPv4 address"));
                    }
                    remote_ip = Some(Remote::Ip(ip));
                }
                "local_ip" => {
                    let ip = value
                        .parse()
                        .map_err(|_| bad(name, value, "an IPv4 address"))?;
                    config.local_ip = Some(ip);
                }
                "key" => {
                    config.key = match value {
                        "flow" => TunnelKey::Flow,
                        _ => {
                            let vni = crate::field::parse_uint(value)
                                .filter(|&v| v <= u128::from(kind.max_key()))
                                .ok_or_else(|| match kind {
                                    TunnelKind::Gre => {
                                        TunnelConfigError::BadGreKey(value.to_string())
                                    }
                                    _ => TunnelConfigError::BadKey(value.to_string()),
                                })?;
                            TunnelKey::Fixed(vni as u32)
                        }
                    };
                }
                "dst_port" if kind == TunnelKind::Gre => {
                    return Err(bad(
                        name,
                        value,
                        "GRE is not carried in UDP: it has no port",
                    ));
                }
                "dst_port" => {
                    config.dst_port = value
                        .parse()
                        .ok()
                        .filter(|&p| p != 0)
                        .ok_or_else(|| bad(name, value, "a UDP port, 1 to 65535"))?;
                }
                "df_default" => config.df = flag(name, value)?,
                "csum" => config.csum = flag(name, value)?,
                "ttl" => {
                    config.ttl = value
                        .parse()
                        .ok()
                        .filter(|&t| t != 0)
                        .ok_or_else(|| bad(name, value, "a TTL, 1 to 255"))?;
                }
                _ => return Err(TunnelConfigError::UnknownOption(name.to_string())),
            }
            match given {
                "in_key" => in_key = Some((value, config.key)),
                "out_key" => out_key = Some((value, config.key)),
                _ => {}
            }
        }
        match (in_key, out_key) {
            (None, None) => {}
            _ if seen.contains(&"key") => return Err(TunnelConfigError::KeyAndSplitKey),
            (Some((_, i)), Some((_, o))) if i == o => config.key = i,
            (i, o) => {
                let text =
                    |k: Option<(&str, TunnelKey)>| k.map_or("(none)", |(t, _)| t).to_string();
                return Err(TunnelConfigError::SplitKey {
                    in_key: text(i),
                    out_key: text(o),
                });
            }
        }
        config.remote_ip = remote_ip.ok_or(TunnelConfigError::NoRemote(kind.name()))?;
        if let (Remote::Ip(remote), Some(local)) = (config.remote_ip, config.local_ip)
            && remote == local
        {
            return Err(TunnelConfigError::RemoteIsLocal(remote));
        }
        Ok(config)
    }
}

impl fmt::Display for TunnelConfig {
    /// As the port was given, every option spelled out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:remote_ip={}", self.kind.name(), self.remote_ip)?;
        if let Some(local) = self.local_ip {
            write!(f, ",local_ip={local}")?;
        }
        match self.key {
            TunnelKey::Fixed(vni) => write!(f, ",key={vni}")?,
            TunnelKey::Flow => f.write_str(",key=flow")?,
            TunnelKey::Absent => {}
        }
        if self.kind != TunnelKind::Gre {
            write!(f, ",dst_port={}", self.dst_port)?;
        }
        write!(
            f,
            ",df_default={},csum={},ttl={}",
            self.df, self.csum, self.ttl
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_with_open_vswitch_defaults() {
        let config: TunnelConfig = "vxlan:remote_ip=192.0.2.2".parse().unwrap();
        assert_eq!(config.kind, TunnelKind::Vxlan);
        assert_eq!(config.remote_ip, Remote::Ip(Ipv4Addr::new(192, 0, 2, 2)));
        assert_eq!(config.key, TunnelKey::Fixed(0));
        assert_eq!(config.dst_port, 4789);
        assert!(config.df && !config.csum);
        let config: TunnelConfig =
            "geneve:remote_ip=192.0.2.2,local_ip=192.0.2.1,key=flow,dst_port=7000,csum=true"
                .parse()
                .unwrap();
        assert_eq!(config.kind, TunnelKind::Geneve);
        assert_eq!(config.local_ip, Some(Ipv4Addr::new(192, 0, 2, 1)));
        assert_eq!(config.key, TunnelKey::Flow);
        assert_eq!(config.dst_port, 7000);
        assert!(config.csum);
        assert_eq!(config.vni(0x1_2345_6789), 0x45_6789);
        let again: TunnelConfig = config.to_string().parse().unwrap();
        assert_eq!(again, config);
        let fixed: TunnelConfig = "vxlan:remote_ip=192.0.2.2,key=0xffffff".parse().unwrap();
        assert_eq!(fixed.vni(7), MAX_VNI);
        assert!(fixed.takes_vni(MAX_VNI) && !fixed.takes_vni(7));
        let any: TunnelConfig = "vxlan:remote_ip=flow,local_ip=192.0.2.1".parse().unwrap();
        assert_eq!(any.remote_ip, Remote::Flow);
        assert_eq!(
            any.to_string(),
            "vxlan:remote_ip=flow,local_ip=192.0.2.1,key=0,dst_port=4789,df_default=true,\
             csum=false,ttl=64"
        );
        assert_eq!(any.to_string().parse::<TunnelConfig>().unwrap(), any);
    }

    #[test]
    fn gre_keys_are_32_bits_and_may_be_absent() {
        let keyless: TunnelConfig = "gre:remote_ip=192.0.2.2".parse().unwrap();
        assert_eq!(keyless.kind, TunnelKind::Gre);
        assert_eq!(keyless.key, TunnelKey::Absent);
        assert_eq!(keyless.dst_port, 0);
        assert_eq!(keyless.vni(7), 0);
        assert!(keyless.takes_vni(0) && !keyless.takes_vni(7));
        assert_eq!(
            keyless.to_string(),
            "gre:remote_ip=192.0.2.2,df_default=true,csum=false,ttl=64"
        );
        assert_eq!(
            keyless.to_string().parse::<TunnelConfig>().unwrap(),
            keyless
        );
        let keyed: TunnelConfig = "gre:remote_ip=192.0.2.2,key=0xffffffff".parse().unwrap();
        assert_eq!(keyed.key, TunnelKey::Fixed(u32::MAX));
        let flow: TunnelConfig = "gre:remote_ip=192.0.2.2,key=flow,csum=true"
            .parse()
            .unwrap();
        assert_eq!(flow.vni(0x1_2345_6789), 0x2345_6789);
        assert_eq!(flow.to_string().parse::<TunnelConfig>().unwrap(), flow);
    }

    #[test]
    fn bad_options_are_named() {
        let err = |spec: &str| spec.parse::<TunnelConfig>().unwrap_err().to_string();
        assert_eq!(
            err("vxlan:key=5"),
            "a vxlan port needs remote_ip=IP (the far end of the tunnel) or remote_ip=flow"
        );
        assert!(err("vxlan:remote_ip=10.0.0.1,key=16777216").starts_with("key=16777216: a VNI"));
        assert!(err("geneve:remote_ip=10.0.0.1,key=-1").starts_with("key=-1"));
        assert!(err("vxlan:remote_ip=10.0.0.300").contains("an IPv4 address"));
        assert!(err("vxlan:remote_ip=224.0.0.1").contains("unicast"));
        assert!(err("vxlan:remote_ip=10.0.0.1,colour=red").starts_with("unknown option 'colour'"));
        assert!(err("vxlan:remote_ip=10.0.0.1,dst_port=0").contains("a UDP port"));
        assert!(err("ipip:remote_ip=10.0.0.1").contains("not a tunnel"));
        assert!(err("gre:remote_ip=10.0.0.1,key=4294967296").starts_with("key=4294967296: a GRE"));
        assert_eq!(
            err("gre:remote_ip=10.0.0.1,dst_port=4789"),
            "dst_port=4789: GRE is not carried in UDP: it has no port"
        );
        // Nothing silently merged: an option twice, keys that differ each way, a far end
        // that is this host.
        assert_eq!(
            err("vxlan:remote_ip=10.0.0.1,remote_ip=10.0.0.2"),
            "remote_ip is given twice"
        );
        assert!(
            err("vxlan:remote_ip=10.0.0.1,in_key=5,out_key=6")
                .starts_with("in_key=5, out_key=6: a tunnel port here has one key both ways")
        );
        assert!(err("vxlan:remote_ip=10.0.0.1,in_key=5").starts_with("in_key=5, out_key=(none)"));
        assert!(err("vxlan:remote_ip=10.0.0.1,key=5,in_key=5,out_key=5").starts_with("key= with"));
        assert_eq!(
            err("vxlan:remote_ip=10.0.0.1,local_ip=10.0.0.1"),
            "remote_ip=10.0.0.1 is local_ip: a tunnel's far end is another host"
        );
        let both: TunnelConfig = "vxlan:remote_ip=10.0.0.1,in_key=7,out_key=0x7"
            .parse()
            .unwrap();
        assert_eq!(both.key, TunnelKey::Fixed(7));
    }
}
