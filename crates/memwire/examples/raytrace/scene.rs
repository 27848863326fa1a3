//! A small scene of our own and a classic recursive ray tracer (spheres on a
//! checkered floor, one point light, hard shadows, mirror reflections).
//! Deterministic: the same pixel always gets the same bytes, on any rank, so
//! a parallel image can be compared byte for byte with a serial one.

#[derive(Debug, Clone, Copy)]
struct V(f64, f64, f64);

impl V {
    fn add(self, o: V) -> V {
        V(self.0 + o.0, self.1 + o.1, self.2 + o.2)
    }
    fn sub(self, o: V) -> V {
        V(self.0 - o.0, self.1 - o.1, self.2 - o.2)
    }
    fn mul(self, k: f64) -> V {
        V(self.0 * k, self.1 * k, self.2 * k)
    }
    fn dot(self, o: V) -> f64 {
        self.0 * o.0 + self.1 * o.1 + self.2 * o.2
    }
    fn hadamard(self, o: V) -> V {
        V(self.0 * o.0, self.1 * o.1, self.2 * o.2)
    }
    fn norm(self) -> V {
        self.mul(1.0 / self.dot(self).sqrt())
    }
}

struct Sphere {
    center: V,
    radius: f64,
    color: V,
    mirror: f64,
}

const SPHERES: [Sphere; 4] = [
    Sphere { center: V(0.0, 1.0, 6.0), radius: 1.0, color: V(0.9, 0.2, 0.2), mirror: 0.3 },
    Sphere { center: V(-2.2, 0.7, 7.5), radius: 0.7, color: V(0.2, 0.8, 0.3), mirror: 0.1 },
    Sphere { center: V(2.0, 0.6, 5.0), radius: 0.6, color: V(0.9, 0.9, 0.95), mirror: 0.8 },
    Sphere { center: V(0.8, 0.35, 3.8), radius: 0.35, color: V(0.2, 0.3, 0.9), mirror: 0.2 },
];
const LIGHT: V = V(-4.0, 6.0, 1.0);
const SKY: V = V(0.55, 0.7, 0.95);
const MAX_DEPTH: u32 = 4;

enum Hit {
    Sphere(usize),
    Floor,
}

fn intersect(origin: V, dir: V) -> Option<(f64, Hit)> {
    let mut best: Option<(f64, Hit)> = None;
    for (i, s) in SPHERES.iter().enumerate() {
        let oc = origin.sub(s.center);
        let b = oc.dot(dir);
        let c = oc.dot(oc) - s.radius * s.radius;
        let disc = b * b - c;
        if disc < 0.0 {
            continue;
        }
        let t = -b - disc.sqrt();
        if t > 1e-6 && best.as_ref().is_none_or(|(bt, _)| t < *bt) {
            best = Some((t, Hit::Sphere(i)));
        }
    }
    if dir.1 < -1e-9 {
        let t = -origin.1 / dir.1;
        if t > 1e-6 && best.as_ref().is_none_or(|(bt, _)| t < *bt) {
            best = Some((t, Hit::Floor));
        }
    }
    best
}

fn trace(origin: V, dir: V, depth: u32) -> V {
    let Some((t, hit)) = intersect(origin, dir) else {
        return SKY.mul(1.0 - 0.4 * dir.1.max(0.0));
    };
    let point = origin.add(dir.mul(t));
    let (normal, color, mirror) = match hit {
        Hit::Sphere(i) => (point.sub(SPHERES[i].center).norm(), SPHERES[i].color, SPHERES[i].mirror),
        Hit::Floor => {
            let checker = ((point.0.floor() + point.2.floor()) as i64).rem_euclid(2) == 0;
            (V(0.0, 1.0, 0.0), if checker { V(0.85, 0.85, 0.8) } else { V(0.25, 0.25, 0.3) }, 0.15)
        }
    };
    let to_light = LIGHT.sub(point);
    let light_dist = to_light.dot(to_light).sqrt();
    let l = to_light.mul(1.0 / light_dist);
    let lit = intersect(point.add(normal.mul(1e-4)), l).is_none_or(|(ts, _)| ts > light_dist);
    let diffuse = if lit { normal.dot(l).max(0.0) } else { 0.0 };
    let reflected_dir = dir.sub(normal.mul(2.0 * dir.dot(normal)));
    let specular = if lit { reflected_dir.dot(l).max(0.0).powi(40) } else { 0.0 };
    let mut out = color.mul(0.1 + 0.9 * diffuse).add(V(1.0, 1.0, 1.0).mul(0.5 * specular));
    if depth < MAX_DEPTH && mirror > 0.0 {
        let bounce = trace(point.add(normal.mul(1e-4)), reflected_dir, depth + 1);
        out = out.mul(1.0 - mirror).add(bounce.hadamard(V(1.0, 1.0, 1.0)).mul(mirror));
    }
    out
}

/// The RGB bytes of pixel `(x, y)` of a `width × height` image.
pub fn pixel(x: u32, y: u32, width: u32, height: u32) -> [u8; 3] {
    let aspect = f64::from(width) / f64::from(height);
    let px = (2.0 * (f64::from(x) + 0.5) / f64::from(width) - 1.0) * aspect * 0.6;
    let py = (1.0 - 2.0 * (f64::from(y) + 0.5) / f64::from(height)) * 0.6;
    let eye = V(0.0, 1.6, -1.0);
    let dir = V(px, py - 0.15, 1.0).norm();
    let c = trace(eye, dir, 0);
    let to_byte = |v: f64| (v.clamp(0.0, 1.0).powf(1.0 / 2.2) * 255.0 + 0.5) as u8;
    [to_byte(c.0), to_byte(c.1), to_byte(c.2)]
}

/// Renders pixels `first..first + out.len() / 3` (row-major) into `out`.
pub fn render_span(first: u64, out: &mut [u8], width: u32, height: u32) {
    for (i, rgb) in out.chunks_exact_mut(3).enumerate() {
        let index = first + i as u64;
        let (x, y) = ((index % u64::from(width)) as u32, (index / u64::from(width)) as u32);
        rgb.copy_from_slice(&pixel(x, y, width, height));
    }
}
