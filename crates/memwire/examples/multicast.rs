//! Team multicast: every rank in turn puts a buffer into every other
//! rank's region, 8 B to 4 MiB, checked byte for byte. Run with
//! `mwrun -n 4 target/release/examples/multicast`; `MW_MCAST=1` insists on
//! IP multicast, `MW_MCAST=0` uses the tree. Prints which one the team uses
//! and this rank's multicast counters.
use memwire::{Access, Endpoint};

fn main() -> memwire::Result<()> {
    let ep = Endpoint::init()?;
    run(&ep)?;
    ep.finalize()
}

fn run(ep: &Endpoint) -> memwire::Result<()> {
    const MAX: usize = 4 << 20;
    let mut team = ep.team_world()?;
    let (me, n) = (team.rank(), team.size());
    let region = ep.alloc(MAX, Access::READ_WRITE)?;
    let group = team.multicast_group(&region)?;
    for (i, len) in [8usize, 1000, 65_536, 1 << 20, MAX].into_iter().enumerate() {
        for root in 0..n {
            let data: Vec<u8> = (0..len).map(|b| (b as u32 * 31 + root * 7 + i as u32) as u8).collect();
            if me == root {
                region.write(0, &data)?;
            }
            team.multicast(&group, root, 0, len)?;
            let mut got = vec![0u8; len];
            region.read(0, &mut got)?;
            assert!(got == data, "rank {me}: {len} bytes from rank {root} differ");
            team.barrier()?;
        }
    }
    let how = if team.uses_ip_multicast() { "IP multicast" } else { "the tree" };
    let stats = ep.stats().0.mcast;
    println!(
        "rank {me}/{n}: multicast ok by {how} (rooted {} by IP, {} by the tree; received {} segments from the group, {} by repair)",
        stats.ip_transfers, stats.tree_fallbacks, stats.received_via_group, stats.received_via_unicast
    );
    Ok(())
}
