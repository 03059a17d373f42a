"""A reactive learning switch on os-ken, as a controller application is written: every
unknown packet comes up as a PACKET_IN (a table-miss rule), goes back out as a PACKET_OUT,
and a learned destination gets a FLOW_MOD followed by a BARRIER. Once a second it asks for
the flow statistics. It prints what it sees, for the test to read."""

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.lib.packet import ethernet, packet
from os_ken.ofproto import ofproto_v1_3


class LearningSwitch(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.macs = {}
        self.datapath = None
        hub.spawn(self.ask_for_stats)

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def features(self, ev):
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        dp.send_msg(parser.OFPFlowMod(dp, command=ofp.OFPFC_DELETE, table_id=ofp.OFPTT_ALL,
                                      out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY))
        miss = [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)]
        self.add_flow(dp, 0, parser.OFPMatch(), miss)
        dp.send_msg(parser.OFPBarrierRequest(dp))
        self.datapath = dp
        print("connected dpid=%016x" % dp.id, flush=True)

    def add_flow(self, dp, priority, match, actions):
        parser = dp.ofproto_parser
        instructions = [parser.OFPInstructionActions(dp.ofproto.OFPIT_APPLY_ACTIONS, actions)]
        dp.send_msg(parser.OFPFlowMod(dp, priority=priority, match=match,
                                      instructions=instructions))

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        in_port = msg.match["in_port"]
        eth = packet.Packet(msg.data).get_protocol(ethernet.ethernet)
        print("packet_in reason=%d table=%d in_port=%d len=%d" %
              (msg.reason, msg.table_id, in_port, len(msg.data)), flush=True)
        self.macs[eth.src] = in_port
        out = self.macs.get(eth.dst, ofp.OFPP_FLOOD)
        actions = [parser.OFPActionOutput(out)]
        if out != ofp.OFPP_FLOOD:
            self.add_flow(dp, 1, parser.OFPMatch(in_port=in_port, eth_dst=eth.dst), actions)
            dp.send_msg(parser.OFPBarrierRequest(dp))
        dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=ofp.OFP_NO_BUFFER,
                                        in_port=in_port, actions=actions, data=msg.data))

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def barrier_reply(self, ev):
        print("barrier reply", flush=True)

    def ask_for_stats(self):
        while True:
            hub.sleep(1)
            if self.datapath is not None:
                dp = self.datapath
                dp.send_msg(dp.ofproto_parser.OFPFlowStatsRequest(dp))

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def flow_stats(self, ev):
        body = ev.msg.body
        print("flow stats: %d flows, %d packets" %
              (len(body), sum(s.packet_count for s in body)), flush=True)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, MAIN_DISPATCHER)
    def error(self, ev):
        print("error type=%d code=%d" % (ev.msg.type, ev.msg.code), flush=True)
