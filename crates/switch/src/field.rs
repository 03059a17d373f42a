//! Match fields and the packed flow: the flow key laid out in 64-bit words, so matching,
//! masking and hashing are word operations (OVS's `miniflow` idea without the sparseness).
//! A packet fills the first [`PACKET_WORDS`]; the pipeline's own state (metadata and the
//! sixteen registers) follows, zero as every packet arrives.
//!
//! The same [`FlowBits`] type holds a key, a masked key and a mask.
//!
//! ARP's hardware addresses share the words of IPv6's addresses (as OVS's `struct flow` shares
//! `nw_src` between IPv4 and ARP), IPv6's flow label the bits of ARP's sender address, and
//! TCP's flags those of ARP's opcode: no packet has both, and every match on either pins
//! `dl_type` (the prerequisites), so a rule for one never admits a packet of the other.
//! [`Field::overlaps`] names the pairs; code that lists a match's fields shows the one its
//! `dl_type` means.

use core::fmt;
use core::hash::{BuildHasherDefault, Hash, Hasher};
use std::net::{Ipv4Addr, Ipv6Addr};

use wirespeed_packet::MacAddr;
use wirespeed_packet::flow_key::FlowKey;

pub const FLOW_WORDS: usize = 22;
/// The words of a packet's flow as it arrives: all but the metadata's and the registers',
/// which are zero then (only actions, between tables, set them). The datapath's caches hold
/// arriving packets' flows and key on these alone ([`PacketKey`]). The tunnel's words (10 to 12)
/// are zero for a packet that did not come out of a tunnel.
pub const PACKET_WORDS: usize = 13;
/// The first of the tunnel metadata's words ([`TunnelMeta`]).
const TUNNEL_WORD: usize = 10;
/// The first of the registers' words, two registers a word.
const REGISTER_WORD: usize = 14;
/// How many 32-bit registers a flow has (`reg0` to `reg15`, as Open vSwitch's).
pub const REGISTERS: u8 = 16;
const REGISTER_NAMES: [&str; REGISTERS as usize] = [
    "reg0", "reg1", "reg2", "reg3", "reg4", "reg5", "reg6", "reg7", "reg8", "reg9", "reg10",
    "reg11", "reg12", "reg13", "reg14", "reg15",
];

/// What a packet's tunnel said about it, for the flow: set when a tunnel port decapsulates
/// it (OVS's `flow_tnl`), zero otherwise.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub struct TunnelMeta {
    /// The VNI (VXLAN, Geneve), as `tun_id`.
    pub id: u64,
    /// The outer IPv4 source and destination, as `tun_src` and `tun_dst`.
    pub src: u32,
    pub dst: u32,
    /// Geneve: the first eight bytes of the options, raw (the first TLV's class, type and
    /// length, and its first four bytes of data), as `tun_opts`; zero without options.
    pub opts: u64,
}

impl TunnelMeta {
    /// The metadata a flow holds (zero: its packet did not come out of a tunnel).
    #[inline]
    pub fn read(flow: &FlowBits) -> TunnelMeta {
        let ends = flow.0[TUNNEL_WORD + 1];
        TunnelMeta {
            id: flow.0[TUNNEL_WORD],
            src: ends as u32,
            dst: (ends >> 32) as u32,
            opts: flow.0[TUNNEL_WORD + 2],
        }
    }

    /// Writes the metadata into a packet's flow.
    #[inline]
    pub fn write(&self, flow: &mut FlowBits) {
        flow.0[TUNNEL_WORD] = self.id;
        flow.0[TUNNEL_WORD + 1] = u64::from(self.src) | (u64::from(self.dst) << 32);
        flow.0[TUNNEL_WORD + 2] = self.opts;
    }
}

/// What an output to a tunnel port sends with, from the flow as the output ran: the VNI
/// (`tun_id`, for a `key=flow` port) and the far end (`tun_dst`, for a `remote_ip=flow`
/// port).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TunnelOut {
    pub id: u64,
    pub dst: Ipv4Addr,
}

impl Default for TunnelOut {
    fn default() -> TunnelOut {
        TunnelOut {
            id: 0,
            dst: Ipv4Addr::UNSPECIFIED,
        }
    }
}

impl TunnelOut {
    #[inline]
    pub fn of(flow: &FlowBits) -> TunnelOut {
        let meta = TunnelMeta::read(flow);
        TunnelOut {
            id: meta.id,
            dst: Ipv4Addr::from(meta.dst),
        }
    }
}

const ARP: u16 = wirespeed_packet::EtherType::ARP.0;

/// A flow key, masked key or mask, packed (see [`Field::layout`]).
#[derive(Clone, Copy, Eq, Default, Debug)]
pub struct FlowBits(pub [u64; FLOW_WORDS]);

impl FlowBits {
    pub const ZERO: FlowBits = FlowBits([0; FLOW_WORDS]);
    pub const ALL_ONES: FlowBits = FlowBits([u64::MAX; FLOW_WORDS]);

    /// Packs a parsed key.
    pub fn from_key(key: &FlowKey) -> FlowBits {
        let mac = |mac: MacAddr| {
            let [a, b, c, d, e, f] = mac.0;
            u64::from_be_bytes([0, 0, a, b, c, d, e, f])
        };
        // An ARP packet has no IPv6 addresses: its hardware addresses take their words.
        let (src_high, dst_high) = if key.dl_type == ARP {
            (mac(key.arp_sha), mac(key.arp_tha))
        } else {
            ((key.ipv6_src >> 64) as u64, (key.ipv6_dst >> 64) as u64)
        };
        FlowBits([
            u64::from(key.in_port)
                | (u64::from(key.dl_type) << 32)
                | (u64::from(key.vlan_tci) << 48),
            mac(key.dl_src) | (u64::from(key.nw_proto) << 48) | (u64::from(key.nw_tos) << 56),
            mac(key.dl_dst) | (u64::from(key.nw_ttl) << 48) | (u64::from(key.icmp_type) << 56),
            u64::from(key.nw_src) | (u64::from(key.nw_dst) << 32),
            u64::from(key.tp_src)
                | (u64::from(key.tp_dst) << 16)
                | (u64::from(key.arp_op) << 32)
                | (u64::from(key.tcp_flags) << 32)
                | (u64::from(key.icmp_code) << 48)
                | (u64::from(key.nw_ecn) << 56),
            u64::from(key.arp_spa) | u64::from(key.ipv6_label) | (u64::from(key.arp_tpa) << 32),
            src_high,
            key.ipv6_src as u64,
            dst_high,
            key.ipv6_dst as u64,
            // tunnel metadata: zero until a tunnel port writes it (TunnelMeta::write).
            0,
            0,
            0,
            // metadata and registers: zero as a packet arrives; actions set them between
            // tables.
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ])
    }

    pub fn and(&self, mask: &FlowBits) -> FlowBits {
        let mut out = *self;
        for (word, mask) in out.0.iter_mut().zip(&mask.0) {
            *word &= mask;
        }
        out
    }

    pub fn or_assign(&mut self, other: &FlowBits) {
        for (word, other) in self.0.iter_mut().zip(&other.0) {
            *word |= other;
        }
    }

    /// True if `self & mask == value` (value is already masked).
    pub fn matches(&self, value: &FlowBits, mask: &FlowBits) -> bool {
        self.0
            .iter()
            .zip(&mask.0)
            .zip(&value.0)
            .all(|((word, mask), value)| word & mask == *value)
    }

    /// True if every bit set in `self` is set in `other`.
    pub fn is_subset_of(&self, other: &FlowBits) -> bool {
        self.0.iter().zip(&other.0).all(|(a, b)| a & !b == 0)
    }

    /// A 64-bit hash of the words.
    pub fn hash64(&self) -> u64 {
        hash_words(&self.0)
    }

    /// The words of an arriving packet's flow, the [`PacketKey`]'s, in place (no copy).
    #[inline]
    pub fn packet_words(&self) -> &[u64; PACKET_WORDS] {
        self.0
            .first_chunk()
            .expect("the flow has the packet's words")
    }
}

/// A 64-bit hash of `words` (multiply-rotate, as in FxHash; keys are not attacker-chosen in
/// a way that matters here: a collision costs a compare, never a wrong decision).
fn hash_words(words: &[u64]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut hash = 0u64;
    for &word in words {
        hash = (hash.rotate_left(5) ^ word).wrapping_mul(K);
    }
    hash ^ (hash >> 29)
}

/// Whether two keys' words are equal, compared all at once: the derived comparison calls
/// `memcmp`, which was a sixth of a cache lookup's time (perf, the stages example).
#[inline]
pub(crate) fn words_equal(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).fold(0, |differ, (a, b)| differ | (a ^ b)) == 0
}

impl PartialEq for FlowBits {
    fn eq(&self, other: &FlowBits) -> bool {
        words_equal(&self.0, &other.0)
    }
}

impl Hash for FlowBits {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash64());
    }
}

/// An arriving packet's flow, or a masked one, without the pipeline's state
/// ([`PACKET_WORDS`]): the key of the exact-match and megaflow caches. The lookups that made a
/// megaflow saw the metadata and registers as the translation's actions left them: every
/// packet arrives with zeros there, and what an action wrote from packet bits had those bits
/// un-wildcarded, so leaving them out of its key (and its mask) admits no packet it would not.
#[derive(Clone, Copy, Eq, Debug)]
pub struct PacketKey(pub [u64; PACKET_WORDS]);

impl PartialEq for PacketKey {
    fn eq(&self, other: &PacketKey) -> bool {
        words_equal(&self.0, &other.0)
    }
}

impl PacketKey {
    /// The key of an arriving packet's flow.
    pub fn of(flow: &FlowBits) -> PacketKey {
        debug_assert!(
            flow.0[PACKET_WORDS..].iter().all(|&word| word == 0),
            "a packet arrives without metadata or registers"
        );
        PacketKey::masked(flow, &FlowBits::ALL_ONES)
    }

    /// The key of `flow & mask`.
    pub fn masked(flow: &FlowBits, mask: &FlowBits) -> PacketKey {
        PacketKey(core::array::from_fn(|i| flow.0[i] & mask.0[i]))
    }

    /// A 64-bit hash of the words, for the caches only (nothing outside them sees it): the
    /// words are multiplied in five independent pairs and the products summed, so the hash
    /// costs one multiply's latency plus a final mix, not ten chained multiplies as
    /// [`FlowBits::hash64`] (which selects group buckets, so keeps its values) does.
    #[inline]
    pub fn hash64(&self) -> u64 {
        hash_packet_words(&self.0)
    }
}

/// [`PacketKey::hash64`]: wyhash's folded multiply on each pair of words, each word first
/// mixed with a constant of its own so equal words in different places hash differently
/// (the odd word last, with a constant).
#[inline]
pub fn hash_packet_words(words: &[u64; PACKET_WORDS]) -> u64 {
    const K: [u64; PACKET_WORDS + 1] = [
        0xa076_1d64_78bd_642f,
        0xe703_7ed1_a0b4_28db,
        0x8ebc_6af0_9c88_c6e3,
        0x5899_65cc_7537_4cc3,
        0x1d8e_4e27_c47d_124f,
        0x9e37_79b9_7f4a_7c15,
        0xbf58_476d_1ce4_e5b9,
        0x94d0_49bb_1331_11eb,
        0x2545_f491_4f6c_dd1d,
        0x517c_c1b7_2722_0a95,
        0x6c62_272e_07bb_0142,
        0x62b8_2175_6295_c58d,
        0x9fb2_1c65_1e98_df25,
        0xc2b2_ae3d_27d4_eb4f,
    ];
    let fold = |a: u64, b: u64| {
        let product = u128::from(a) * u128::from(b);
        (product as u64) ^ ((product >> 64) as u64)
    };
    let mut sum = 0u64;
    for pair in 0..PACKET_WORDS / 2 {
        let (a, b) = (2 * pair, 2 * pair + 1);
        sum = sum.wrapping_add(fold(words[a] ^ K[a], words[b] ^ K[b]));
    }
    let last = PACKET_WORDS - 1;
    sum = sum.wrapping_add(fold(words[last] ^ K[last], K[PACKET_WORDS]));
    fold(sum ^ K[0], K[1])
}

impl Hash for PacketKey {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash64());
    }
}

/// Passes [`FlowBits::hash64`] through, so hash maps keyed by flows hash once.
#[derive(Default, Clone, Copy)]
pub struct FlowHasher(u64);

impl Hasher for FlowHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(*byte)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

pub type FlowHashBuilder = BuildHasherDefault<FlowHasher>;

/// One matchable field of the flow, in ovs-ofctl's names.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, PartialOrd, Ord)]
pub enum Field {
    InPort,
    /// OpenFlow's pipeline metadata, written by `write_metadata` for later tables.
    Metadata,
    DlSrc,
    DlDst,
    /// The whole 802.1Q TCI with [`wirespeed_packet::flow_key::VLAN_PRESENT`]; `dl_vlan` and
    /// `dl_vlan_pcp` are spellings of parts of it.
    VlanTci,
    DlType,
    NwSrc,
    NwDst,
    Ipv6Src,
    Ipv6Dst,
    NwProto,
    NwTos,
    NwEcn,
    NwTtl,
    TpSrc,
    TpDst,
    IcmpType,
    IcmpCode,
    ArpSpa,
    ArpTpa,
    ArpOp,
    ArpSha,
    ArpTha,
    /// TCP's flags and the three reserved bits above them (12 bits), as Open vSwitch's.
    TcpFlags,
    /// IPv6's flow label (20 bits).
    Ipv6Label,
    /// The tunnel's VNI (the key a VXLAN or Geneve header carries).
    TunId,
    /// The outer IPv4 source and destination of a decapsulated packet.
    TunSrc,
    TunDst,
    /// Geneve's first option, raw: see [`TunnelMeta::opts`].
    TunOpts,
    /// A 32-bit register (0 to 15, see [`REGISTERS`]): scratch space for the pipeline, set by
    /// `load`, `move` and `set_field` for later tables; no packet carries it.
    Reg(u8),
}

/// `fields`, then the registers in order.
pub const fn with_registers<const N: usize, const M: usize>(fields: [Field; N]) -> [Field; M] {
    assert!(M == N + REGISTERS as usize);
    let mut out = [Field::InPort; M];
    let mut i = 0;
    while i < M {
        out[i] = match i < N {
            true => fields[i],
            false => Field::Reg((i - N) as u8),
        };
        i += 1;
    }
    out
}

/// How a field's value is written and read in flow syntax.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ValueFormat {
    Decimal,
    Hex,
    Mac,
    Ipv4,
    Ipv6,
    /// Flag names joined by `|` (`syn|ack`), or a number; masked, `+syn-ack` (see
    /// [`crate::tcp_flags`]).
    TcpFlags,
}

impl Field {
    pub const ALL: [Field; 29 + REGISTERS as usize] = with_registers([
        Field::InPort,
        Field::Metadata,
        Field::DlSrc,
        Field::DlDst,
        Field::VlanTci,
        Field::DlType,
        Field::NwSrc,
        Field::NwDst,
        Field::Ipv6Src,
        Field::Ipv6Dst,
        Field::NwProto,
        Field::NwTos,
        Field::NwEcn,
        Field::NwTtl,
        Field::TpSrc,
        Field::TpDst,
        Field::IcmpType,
        Field::IcmpCode,
        Field::ArpSpa,
        Field::ArpTpa,
        Field::ArpOp,
        Field::ArpSha,
        Field::ArpTha,
        Field::TcpFlags,
        Field::Ipv6Label,
        Field::TunId,
        Field::TunSrc,
        Field::TunDst,
        Field::TunOpts,
    ]);

    /// Whether the field is the pipeline's own (metadata, a register), never a packet's: a
    /// write to it steers later lookups and never reaches the datapath.
    pub fn is_pipeline_state(self) -> bool {
        matches!(self, Field::Metadata | Field::Reg(_))
    }

    /// (word, shift, width in bits); 128-bit fields take two words, high word first.
    pub const fn layout(self) -> (usize, u32, u32) {
        match self {
            Field::InPort => (0, 0, 32),
            Field::DlType => (0, 32, 16),
            Field::VlanTci => (0, 48, 16),
            Field::DlSrc => (1, 0, 48),
            Field::NwProto => (1, 48, 8),
            Field::NwTos => (1, 56, 8),
            Field::DlDst => (2, 0, 48),
            Field::NwTtl => (2, 48, 8),
            Field::IcmpType => (2, 56, 8),
            Field::NwSrc => (3, 0, 32),
            Field::NwDst => (3, 32, 32),
            Field::TpSrc => (4, 0, 16),
            Field::TpDst => (4, 16, 16),
            Field::ArpOp => (4, 32, 16),
            Field::TcpFlags => (4, 32, 12),
            Field::IcmpCode => (4, 48, 8),
            Field::NwEcn => (4, 56, 2),
            Field::ArpSpa => (5, 0, 32),
            Field::Ipv6Label => (5, 0, 20),
            Field::ArpTpa => (5, 32, 32),
            Field::Ipv6Src => (6, 0, 128),
            Field::ArpSha => (6, 0, 48),
            Field::Ipv6Dst => (8, 0, 128),
            Field::ArpTha => (8, 0, 48),
            Field::TunId => (TUNNEL_WORD, 0, 64),
            Field::TunSrc => (TUNNEL_WORD + 1, 0, 32),
            Field::TunDst => (TUNNEL_WORD + 1, 32, 32),
            Field::TunOpts => (TUNNEL_WORD + 2, 0, 64),
            Field::Metadata => (13, 0, 64),
            Field::Reg(n) => (REGISTER_WORD + n as usize / 2, (n as u32 % 2) * 32, 32),
        }
    }

    /// The field that shares this one's bits (see the module's comment), if any.
    pub const fn overlaps(self) -> Option<Field> {
        match self {
            Field::ArpSha => Some(Field::Ipv6Src),
            Field::Ipv6Src => Some(Field::ArpSha),
            Field::ArpTha => Some(Field::Ipv6Dst),
            Field::Ipv6Dst => Some(Field::ArpTha),
            Field::TcpFlags => Some(Field::ArpOp),
            Field::ArpOp => Some(Field::TcpFlags),
            Field::Ipv6Label => Some(Field::ArpSpa),
            Field::ArpSpa => Some(Field::Ipv6Label),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Field::InPort => "in_port",
            Field::Metadata => "metadata",
            Field::DlSrc => "dl_src",
            Field::DlDst => "dl_dst",
            Field::VlanTci => "vlan_tci",
            Field::DlType => "dl_type",
            Field::NwSrc => "nw_src",
            Field::NwDst => "nw_dst",
            Field::Ipv6Src => "ipv6_src",
            Field::Ipv6Dst => "ipv6_dst",
            Field::NwProto => "nw_proto",
            Field::NwTos => "nw_tos",
            Field::NwEcn => "nw_ecn",
            Field::NwTtl => "nw_ttl",
            Field::TpSrc => "tp_src",
            Field::TpDst => "tp_dst",
            Field::IcmpType => "icmp_type",
            Field::IcmpCode => "icmp_code",
            Field::ArpSpa => "arp_spa",
            Field::ArpTpa => "arp_tpa",
            Field::ArpOp => "arp_op",
            Field::ArpSha => "arp_sha",
            Field::ArpTha => "arp_tha",
            Field::TcpFlags => "tcp_flags",
            Field::Ipv6Label => "ipv6_label",
            Field::TunId => "tun_id",
            Field::TunSrc => "tun_src",
            Field::TunDst => "tun_dst",
            Field::TunOpts => "tun_opts",
            Field::Reg(n) => REGISTER_NAMES[n as usize],
        }
    }

    /// The field named `name`: ours (ovs-ofctl's OpenFlow 1.0 names), or the OXM name
    /// ovs-ofctl also takes for it (`eth_src`, `ip_dst`, `ipv4_src`, `ip_proto`...).
    pub fn from_name(name: &str) -> Option<Field> {
        let name = match name {
            "eth_src" => "dl_src",
            "eth_dst" => "dl_dst",
            "eth_type" => "dl_type",
            "ip_src" | "ipv4_src" => "nw_src",
            "ip_dst" | "ipv4_dst" => "nw_dst",
            "ip_proto" => "nw_proto",
            "ip_ttl" => "nw_ttl",
            "ip_ecn" => "nw_ecn",
            "icmpv4_type" | "icmpv6_type" => "icmp_type",
            "icmpv4_code" | "icmpv6_code" => "icmp_code",
            // OpenFlow 1.2's names for the transport ports (each meets tp_*'s prerequisite:
            // TCP, UDP or SCTP, whichever the match names).
            "tcp_src" | "udp_src" | "sctp_src" => "tp_src",
            "tcp_dst" | "udp_dst" | "sctp_dst" => "tp_dst",
            "tunnel_id" => "tun_id",
            "tun_ipv4_src" => "tun_src",
            "tun_ipv4_dst" => "tun_dst",
            name => name,
        };
        Field::ALL.into_iter().find(|field| field.name() == name)
    }

    pub fn width(self) -> u32 {
        self.layout().2
    }

    /// All ones over the field's width.
    pub fn full_mask(self) -> u128 {
        match self.width() {
            128 => u128::MAX,
            bits => (1u128 << bits) - 1,
        }
    }

    /// Whether flow syntax takes `value/mask` for the field (ovs-ofctl refuses a mask on
    /// the others: `dl_type=0x800/0xff00` would also match ARP).
    pub fn maskable(self) -> bool {
        matches!(
            self,
            Field::Metadata
                | Field::DlSrc
                | Field::DlDst
                | Field::VlanTci
                | Field::NwSrc
                | Field::NwDst
                | Field::Ipv6Src
                | Field::Ipv6Dst
                | Field::TpSrc
                | Field::TpDst
                | Field::ArpSpa
                | Field::ArpTpa
                | Field::ArpSha
                | Field::ArpTha
                | Field::TcpFlags
                | Field::Ipv6Label
                | Field::TunId
                | Field::TunSrc
                | Field::TunDst
                | Field::TunOpts
                | Field::Reg(_)
        )
    }

    pub fn value_format(self) -> ValueFormat {
        match self {
            Field::DlSrc | Field::DlDst | Field::ArpSha | Field::ArpTha => ValueFormat::Mac,
            Field::NwSrc
            | Field::NwDst
            | Field::ArpSpa
            | Field::ArpTpa
            | Field::TunSrc
            | Field::TunDst => ValueFormat::Ipv4,
            Field::Ipv6Src | Field::Ipv6Dst => ValueFormat::Ipv6,
            Field::DlType
            | Field::VlanTci
            | Field::Metadata
            | Field::TunId
            | Field::TunOpts
            | Field::Ipv6Label
            | Field::Reg(_) => ValueFormat::Hex,
            Field::TcpFlags => ValueFormat::TcpFlags,
            _ => ValueFormat::Decimal,
        }
    }

    pub fn get(self, bits: &FlowBits) -> u128 {
        let (word, shift, width) = self.layout();
        if width == 128 {
            return (u128::from(bits.0[word]) << 64) | u128::from(bits.0[word + 1]);
        }
        u128::from((bits.0[word] >> shift) & (u64::MAX >> (64 - width)))
    }

    /// Writes `value` (truncated to the field's width) into `bits`.
    pub fn set(self, bits: &mut FlowBits, value: u128) {
        let (word, shift, width) = self.layout();
        if width == 128 {
            bits.0[word] = (value >> 64) as u64;
            bits.0[word + 1] = value as u64;
            return;
        }
        let mask = (u64::MAX >> (64 - width)) << shift;
        bits.0[word] = (bits.0[word] & !mask) | (((value as u64) << shift) & mask);
    }

    /// Sets the field's bits in `bits` to ones where `mask` has ones (un-wildcards them).
    pub fn or_mask(self, bits: &mut FlowBits, mask: u128) {
        let current = self.get(bits);
        self.set(bits, current | mask);
    }

    /// Parses a value in the field's format (no mask).
    pub fn parse_value(self, text: &str) -> Option<u128> {
        let value = match self.value_format() {
            ValueFormat::Mac => {
                let mac: MacAddr = text.parse().ok()?;
                let mut octets = [0u8; 16];
                octets[10..].copy_from_slice(&mac.0);
                u128::from_be_bytes(octets)
            }
            ValueFormat::Ipv4 => u128::from(u32::from(text.parse::<Ipv4Addr>().ok()?)),
            ValueFormat::Ipv6 => u128::from(text.parse::<Ipv6Addr>().ok()?),
            ValueFormat::TcpFlags => u128::from(crate::tcp_flags::parse_exact(text)?),
            ValueFormat::Decimal | ValueFormat::Hex => parse_uint(text)?,
        };
        (value <= self.full_mask()).then_some(value)
    }

    /// Displays a value in the field's format.
    pub fn display(self, value: u128) -> FieldValue {
        FieldValue { field: self, value }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A field's value formatted as flow syntax writes it.
pub struct FieldValue {
    field: Field,
    value: u128,
}

impl fmt::Display for FieldValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = self.value;
        match self.field.value_format() {
            ValueFormat::Mac => write!(f, "{}", mac_from_value(value)),
            ValueFormat::Ipv4 => write!(f, "{}", Ipv4Addr::from(value as u32)),
            ValueFormat::Ipv6 => write!(f, "{}", Ipv6Addr::from(value)),
            ValueFormat::Hex if self.field == Field::DlType => write!(f, "0x{value:04x}"),
            ValueFormat::TcpFlags => crate::tcp_flags::write_exact(f, value as u16),
            // As ovs-ofctl prints it (C's "%#x", which writes zero without "0x").
            ValueFormat::Hex
                if matches!(
                    self.field,
                    Field::Metadata
                        | Field::TunId
                        | Field::TunOpts
                        | Field::Ipv6Label
                        | Field::Reg(_)
                ) && value == 0 =>
            {
                f.write_str("0")
            }
            ValueFormat::Hex => write!(f, "0x{value:x}"),
            ValueFormat::Decimal => write!(f, "{value}"),
        }
    }
}

/// The MAC address held in a `dl_src` / `dl_dst` value.
pub fn mac_from_value(value: u128) -> MacAddr {
    let bytes = value.to_be_bytes();
    let mut octets = [0u8; 6];
    octets.copy_from_slice(&bytes[10..]);
    MacAddr(octets)
}

/// Parses a decimal or `0x` hexadecimal unsigned number, as ovs-ofctl does.
pub fn parse_uint(text: &str) -> Option<u128> {
    let (digits, radix) = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (text, 10),
    };
    // from_str_radix alone would accept a leading '+'.
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u128::from_str_radix(digits, radix).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fields_overlap_only_where_said_and_fill_the_words() {
        let mut seen = FlowBits::ZERO;
        for field in Field::ALL {
            let mut bits = FlowBits::ZERO;
            field.set(&mut bits, u128::MAX);
            assert_eq!(field.get(&bits), field.full_mask(), "{field}");
            let mut others = seen;
            if let Some(other) = field.overlaps() {
                other.set(&mut others, 0);
            }
            assert_eq!(bits.and(&others), FlowBits::ZERO, "{field} overlaps");
            seen.or_assign(&bits);
        }
        // Only six bits at the top of word 4 are spare.
        assert_eq!(seen.0[4], u64::MAX >> 6);
        assert!(
            (0..FLOW_WORDS)
                .filter(|&w| w != 4)
                .all(|w| seen.0[w] == u64::MAX)
        );
        // The pairs are each other's, and ARP's lie within IPv6's.
        for field in Field::ALL {
            if let Some(other) = field.overlaps() {
                assert_eq!(other.overlaps(), Some(field));
            }
        }
        // Only the pipeline's state lies past a packet's words.
        for field in Field::ALL {
            let past = field.layout().0 >= PACKET_WORDS;
            assert_eq!(past, field.is_pipeline_state(), "{field}");
        }
        assert_eq!(Field::from_name("reg15"), Some(Field::Reg(15)));
        assert_eq!(Field::from_name("reg16"), None);
        let mut arp = FlowBits::ZERO;
        Field::ArpSha.set(&mut arp, u128::MAX);
        let mut ipv6 = FlowBits::ZERO;
        Field::Ipv6Src.set(&mut ipv6, u128::MAX);
        assert!(arp.is_subset_of(&ipv6));
    }

    #[test]
    fn packs_a_key() {
        let key = FlowKey {
            in_port: 7,
            dl_src: MacAddr([2, 0, 0, 0, 0, 1]),
            dl_type: 0x0800,
            vlan_tci: 0x1064,
            nw_dst: 0x0a00_0002,
            tp_dst: 80,
            ipv6_src: 0x2001_0db8 << 96 | 5,
            nw_ecn: 2,
            ..FlowKey::default()
        };
        let bits = FlowBits::from_key(&key);
        assert_eq!(Field::InPort.get(&bits), 7);
        assert_eq!(Field::DlSrc.get(&bits), 0x0200_0000_0001);
        assert_eq!(Field::DlType.get(&bits), 0x0800);
        assert_eq!(Field::VlanTci.get(&bits), 0x1064);
        assert_eq!(Field::NwDst.get(&bits), 0x0a00_0002);
        assert_eq!(Field::TpDst.get(&bits), 80);
        assert_eq!(Field::Ipv6Src.get(&bits), 0x2001_0db8 << 96 | 5);
        assert_eq!(Field::NwSrc.get(&bits), 0);
        assert_eq!(Field::NwEcn.get(&bits), 2);
        assert_eq!(Field::Metadata.get(&bits), 0);
        let arp = FlowKey {
            dl_type: 0x0806,
            arp_sha: MacAddr([2, 0, 0, 0, 0, 9]),
            arp_tha: MacAddr([2, 0, 0, 0, 0, 10]),
            ..FlowKey::default()
        };
        let bits = FlowBits::from_key(&arp);
        assert_eq!(Field::ArpSha.get(&bits), 0x0200_0000_0009);
        assert_eq!(Field::ArpTha.get(&bits), 0x0200_0000_000a);
        // TCP's flags and IPv6's flow label lie where ARP's opcode and sender address do.
        let tcp6 = FlowKey {
            dl_type: 0x86dd,
            nw_proto: 6,
            tp_dst: 443,
            tcp_flags: 0x812,
            ipv6_label: 0xf_1234,
            ..FlowKey::default()
        };
        let bits = FlowBits::from_key(&tcp6);
        assert_eq!(Field::TcpFlags.get(&bits), 0x812);
        assert_eq!(Field::Ipv6Label.get(&bits), 0xf_1234);
        assert_eq!(Field::TpDst.get(&bits), 443);
        assert_eq!(Field::ArpOp.get(&bits), 0x812);
        assert_eq!(Field::ArpSpa.get(&bits), 0xf_1234);
    }

    #[test]
    fn values_parse_and_display() {
        assert_eq!(
            Field::DlSrc.parse_value("02:00:00:00:00:01"),
            Some(0x0200_0000_0001)
        );
        assert_eq!(
            Field::DlSrc.display(0x0200_0000_0001).to_string(),
            "02:00:00:00:00:01"
        );
        assert_eq!(Field::NwSrc.parse_value("10.0.0.1"), Some(0x0a00_0001));
        assert_eq!(Field::DlType.display(0x800).to_string(), "0x0800");
        assert_eq!(Field::TpSrc.parse_value("0x50"), Some(80));
        assert_eq!(Field::TpSrc.parse_value("65536"), None);
        assert_eq!(Field::TpSrc.parse_value("+80"), None);
        assert_eq!(Field::Ipv6Dst.display(1).to_string(), "::1");
    }

    proptest! {
        #[test]
        fn set_then_get(
            index in 0usize..Field::ALL.len(),
            value in any::<u128>(),
            noise in any::<[u64; FLOW_WORDS]>(),
        ) {
            let field = Field::ALL[index];
            let mut bits = FlowBits(noise);
            let before = bits;
            field.set(&mut bits, value);
            prop_assert_eq!(field.get(&bits), value & field.full_mask());
            let others = Field::ALL.into_iter().filter(|&o| o != field && field.overlaps() != Some(o));
            for other in others {
                prop_assert_eq!(other.get(&bits), other.get(&before));
            }
        }
    }
}
