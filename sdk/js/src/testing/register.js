// `node --import jobhost/testing/register` (or this file's path): points
// the host's interfaces, which only exist inside a component, at the fake
// host of `jobhost/testing`, so that reports and their tests run natively.
import { register } from 'node:module';

register('./hooks.js', import.meta.url);
